"""``driftgate demo``: the whole loop on embedded defaults, in one module.

train flow → validate-and-promote → ``driftgate serve`` (real HTTP) → the production
period one year at a time: replay the year in date order (with one injected fault: a
sensor going silent), labels sent to ``POST /feedback`` a month of event time after
their requests, then the drift-check flow on that year with the monitors of
``gates/demo.yaml`` (inputs, refused traffic, outputs, estimated and realized accuracy)
→ reviews, a pause (a request gets 503, then resume), a simulated operator accepting
the contract revision a refused-traffic review proposes (the service then accepts those
records), and retrains judged by the promotion gate, whose new champion serves the
years after → drift and performance over time (plots) → what the rules promise at a
real service's traffic.

The flows are passed in (:class:`DemoFlows`): jobs sit below Prefect in the layers, and
the CLI, which may import both, wires them. Progress goes to ``say`` line by line;
the CLI passes ``typer.echo``.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.jobs.data import prepare_data
from driftgate.stores.factories import control_store, retrain_store, review_store

Say = Callable[[str], None]


@dataclass(frozen=True)
class DemoFlows:
    """The Prefect flows the demo runs (``driftgate.flows``), as plain callables."""

    train: Callable[..., dict]  # train_flow(config_path=..., promote=True) -> summary
    drift_check: Callable[..., list[dict]]  # drift_check_flow(config_path, end, window)


def training_summary_lines(summary: dict) -> list[str]:
    """What ``driftgate train`` and the demo print after registering a version."""
    metrics = summary["metrics"]
    lines = ["", f"Registered {summary['model_uri']} (run {summary['run_id']})"]
    for split, label in (("val", "validation:"), ("test", "test:")):
        if f"{split}_roc_auc" not in metrics:  # multiclass / regression: the task's metrics
            prefix = f"{split}_"
            shown = [f"{k.removeprefix(prefix)} {v:.4f}" for k, v in metrics.items()
                     if k.startswith(prefix)]  # fmt: skip
            lines.append(f"  {label:<12}" + "  ".join(shown))
            continue
        accuracy, auc, loss = (metrics[f"{split}_{m}"] for m in ("accuracy", "roc_auc", "log_loss"))
        lines.append(
            f"  {label:<12}accuracy {accuracy:.4f}  ROC AUC {auc:.4f}  log loss {loss:.4f}"
        )
    lines.append(f"  training data digest {summary['data_digest']}")
    return lines


def run_demo(config: ProjectConfig, config_arg: str | None, flows: DemoFlows, say: Say) -> bool:
    """Run the loop; False when the promotion gate failed (nothing after it runs)."""
    config = archive_revisions(config, say)
    say("== 1. train flow → validate-and-promote (Prefect local mode) ==")
    summary = flows.train(config_path=config_arg, promote=True)
    for line in training_summary_lines(summary):
        say(line)
    gate = summary["gate"]
    if not gate["passed"]:
        say(f"  gate FAILED ({', '.join(gate['failed_checks'])}); champion unchanged")
        say(f"  gate report: {gate['reports']['markdown']}")
        return False
    say(f"  gate PASSED: champion -> v{gate['candidate']}  ({gate['reports']['markdown']})")
    run_loop(config, config_arg, flows, say)
    return True


def run_loop(config: ProjectConfig, config_arg: str | None, flows: DemoFlows, say: Say) -> None:
    """Stages 2-6: serve the champion; then, one year of production at a time, replay
    the year over HTTP (labels a month later) and judge it with the drift-check flow,
    acting as the monitors say (a pause is shown and resumed, a retrain's new champion
    serves the years after); what the monitors did; plots; the monitors' plan."""
    import pandas as pd

    data = prepare_data(config)
    production = data.splits.production
    port = config.serving.port
    base_url = f"http://127.0.0.1:{port}"
    reports = config.home_dir / "reports" / "demo"
    reports.mkdir(parents=True, exist_ok=True)

    say(f"\n== 2. serve models:/{config.model.name}@champion on {base_url} ==")
    control = control_store(config)
    if control.state(config.model.name).paused:  # a previous demo left it paused
        control.resume(config.model.name, reason="demo start", actor="demo")
    control.close()
    # The labels go to POST /feedback, which takes the admin token: one made for this
    # run and handed to the service only.
    token = secrets.token_urlsafe(24)
    service = start_service(
        config_arg, port, reports / "service.log", env={config.serving.admin_token_env: token}
    )
    try:
        # The service loads torch and the model: on a 2-core machine shared with other
        # work that took over 120 s (a demo failed so), so it is given 5 minutes.
        wait_until_ready(base_url, service, timeout=300.0)
        say(f"  ready; log: {reports / 'service.log'}")

        dates = production["date"]
        gates_path = demo_gates_path(config)
        say(
            f"\n== 3. production year by year ({dates.iloc[0]:%Y-%m-%d}..{dates.iloc[-1]:%Y-%m-%d},"
            f" {len(production)} days): replay the year over HTTP, then the drift-check flow "
            f"on it with the monitors of {gates_path.name} =="
        )
        say(
            f"  fault: {FAULT_FEATURE} silent every {FAULT_EVERY} days of {FAULT_YEAR} until "
            f"someone fixes it; each answered day's label (did it rain) reaches POST /feedback "
            f"{LABEL_DELAY_DAYS} days (event time) after its request"
        )
        say(f"  {WINDOW_HEADER}")
        replay = ProductionReplay(base_url, data.features, data.target, token)
        started = time.perf_counter()
        first = dates.iloc[0].tz_localize("UTC")
        last = dates.iloc[-1].tz_localize("UTC")
        points, end = [], first + pd.Timedelta(days=365)
        utc = dates.dt.tz_localize("UTC")
        try:
            while end - pd.Timedelta(days=365) <= last:
                replay.send(production[(utc >= end - pd.Timedelta(days=365)) & (utc < end)])
                judged = flows.drift_check(
                    config_path=config_arg,
                    end=end.isoformat(),
                    window="365d",
                    gates_path=str(gates_path),
                )
                for line in add_judged(points, judged, end):
                    say(f"  {line}")
                if paused_now(config):
                    show_pause_and_resume(config, base_url, data, say)
                    replay.fault_fixed = True
                for line in accept_proposed_revisions(config, base_url):
                    say(f"{'':<26}{line}")
                follow_champion(config, base_url, say)
                end += pd.Timedelta(days=365)
        finally:
            replay.close()
        counts, seconds = replay.counts, time.perf_counter() - started
        say(
            f"  {counts.sent} requests: {counts.accepted} answered and stored, {counts.refused} "
            f"rejected (422, stored as rejected records), {counts.unavailable} refused (503); "
            f"{replay.with_fault} with the fault; {counts.labels_accepted} labels accepted by "
            f"POST /feedback ({seconds:.0f} s with the checks)"
        )
        say_retrains(config, say)
        first_retrain = first_retrain_end(config)
        for line in realized_summary_lines(points, production, data.target, first_retrain):
            say(f"  {line}")

        say("\n== 4. what the monitors did: open reviews ==")
        reviews = review_store(config)
        for review in reviews.list(model_name=config.model.name, status="open"):
            say(
                f"  review {review.id} (v{review.model_version}): {review.monitor} "
                f"({review.metric} {review.observed:.3g}, threshold {review.threshold:g}), "
                f"{review.breaches} breaching windows"
                + (f", features {', '.join(review.features)}" if review.features else "")
            )
        reviews.close()

        say("\n== 5. drift and performance over time ==")
        plots = reports / "plots"
        plots.mkdir(exist_ok=True)
        for test in ("kl", "missing_share"):
            path = plots / f"drift-over-time-{test}.png"
            plot_drift_over_time(points, data.features, test, path)
            say(f"  {path}")
        path = plots / "performance-over-time.png"
        plot_performance_over_time(points, path)
        say(f"  {path}")
        registry.log_monitoring_run(
            config.tracking,
            config.monitoring.experiment,
            "demo: drift over time",
            params={"windows": len(points), "window": "365d"},
            metrics={},
            tags={"driftgate.model_name": config.model.name},
            artifacts={"plots": plots},
        )
        say_plans(config, say)
    finally:
        stop_service(service)


def paused_now(config: ProjectConfig) -> bool:
    control = control_store(config)
    try:
        return control.state(config.model.name).paused
    finally:
        control.close()


def show_pause_and_resume(config: ProjectConfig, base_url: str, data, say: Say) -> None:
    """A monitor paused inference: a request gets 503 naming why; then a person who
    fixed the sensor resumes (``driftgate resume``) and the next request is answered."""
    import httpx

    # An in-contract record (from the reference period), so the answer shows the pause
    # switch and not the contract.
    record = {name: float(data.splits.test[name].iloc[0]) for name in data.features}
    time.sleep(max(config.serving.pause_poll_seconds, 0) + 0.5)
    refused = httpx.post(f"{base_url}/predict", json={"records": [record]}, timeout=30)
    say(f"{'':<26}a request now: HTTP {refused.status_code} {refused.text[:200]}")
    control = control_store(config)
    try:
        control.resume(
            config.model.name, reason="demo: fault understood, sensor fixed", actor="demo"
        )
    finally:
        control.close()
    time.sleep(max(config.serving.pause_poll_seconds, 0) + 0.5)
    restored = httpx.post(f"{base_url}/predict", json={"records": [record]}, timeout=30)
    say(f"{'':<26}sensor fixed, `driftgate resume`: HTTP {restored.status_code}")


def accept_proposed_revisions(config: ProjectConfig, base_url: str, timeout: float = 120):
    """The simulated operator: every open review of the refused-traffic monitor that
    carries a contract revision proposal is accepted, through the function behind
    ``driftgate contract revise --from-review ID --accept``; then wait until the service
    validates with the new file. Yields what happened, line by line."""
    import httpx

    from driftgate.jobs.contract_revision import PROPOSAL_PREFIX, RevisionError, accept_revision

    reviews = review_store(config)
    try:
        proposed = [
            review
            for review in reviews.list(model_name=config.model.name, status="open")
            if review.monitor == REFUSED
            and any(item.startswith(PROPOSAL_PREFIX) for item in review.evidence)
        ]
    finally:
        reviews.close()
    for review in proposed:
        try:
            accepted = accept_revision(config, review.id, by=OPERATOR)
        except RevisionError as exc:
            yield f"operator, review {review.id}: {exc}"
            continue
        yield (
            f"operator accepts review {review.id}'s contract revision -> "
            f"{accepted.path.name} (`driftgate contract revise --from-review {review.id} "
            "--accept`):"
        )
        for line in accepted.revision.diff_lines()[1:]:
            yield f"  {line.strip()}"
        deadline = time.monotonic() + timeout
        while httpx.get(f"{base_url}/readyz", timeout=10).json().get("contract") != (
            accepted.path.name
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the service did not apply {accepted.path} in {timeout} s")
            time.sleep(0.5)
        yield f"  the service now validates requests with {accepted.path.name} (no restart)"


def archive_revisions(config: ProjectConfig, say: Say) -> ProjectConfig:
    """Move the contract revisions an earlier demo accepted out of the way (into
    ``contracts/archived-<time>/``), so this run starts from the shipped contract and
    its operator accepts its own; the config with the contract in effect again."""
    from datetime import UTC, datetime

    from driftgate.config.contract_files import lineage_stem

    folder = config.contract_revisions_dir
    if folder is None or not folder.is_dir():
        return config
    earlier = sorted(folder.glob(f"{lineage_stem(config.contract_in_effect())}.v*.yaml"))
    if not earlier:
        return config
    archive = folder / f"archived-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    archive.mkdir()
    for path in earlier:
        path.rename(archive / path.name)
    say(f"  an earlier demo's contract revisions moved to {archive}")
    contract = str(config.contract_in_effect())
    return config.model_copy(update={"data": config.data.model_copy(update={"contract": contract})})


def follow_champion(config: ProjectConfig, base_url: str, say: Say, timeout: float = 120) -> None:
    """When a retrain moved the champion, wait until the service serves it (it re-reads
    the alias every ``serving.model_poll_seconds``), so the next year is its traffic."""
    import httpx

    champion = registry.alias_version(config.tracking, config.model.name, registry.CHAMPION_ALIAS)
    deadline, said = time.monotonic() + timeout, False
    while True:
        served = httpx.get(f"{base_url}/readyz", timeout=10).json().get("model_version")
        if str(served) == str(champion):
            if said:
                say(f"{'':<26}the service now serves the new champion v{champion}")
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the service still serves v{served}, not the champion v{champion}")
        if not said:
            say(f"{'':<26}champion moved to v{champion}; the service serves v{served}")
            said = True
        time.sleep(1.0)


def say_plans(config: ProjectConfig, say: Say, within: int = 12) -> None:
    """What the gate config's rules promise at a real service's traffic, rather than
    the demo's yearly windows: ``driftgate monitors plan`` at one request a minute (60
    rows an hour, where KL 0.1 is too few rows to decide) and at 1,000 an hour."""
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.monitor_plan import describe, plan_monitors

    gates = load_gate_config(config.gates)
    for rows in (60, 1_000):
        say(f"\n== 6. `driftgate monitors plan --rows-per-window {rows}` ==")
        plans = plan_monitors(config, gates, rows_per_window=rows, within=within)
        for line in describe(plans, within).splitlines():
            say(f"  {line}")


# -- what each yearly window showed ------------------------------------------------------

# Who accepts the contract revisions the refused-traffic reviews propose.
OPERATOR = "demo: simulated operator"
# The monitors of gates/demo.yaml the window table shows, by name.
REFUSED, RECEIVED, OUTPUTS, ESTIMATED, REALIZED = (
    "rejected-traffic",
    "received-inputs-ks",
    "outputs-shift",
    "estimated-accuracy",
    "realized-accuracy",
)
WINDOW_HEADER = (
    f"{'window':<22} {'rows':>4} {'refused':>7} {'inputs p':>8} {'outputs p':>9} {'est. acc':>8} "
    f"{'real acc':>8} {'labels':>6}  breached"
)


def demo_gates_path(config: ProjectConfig):
    """The monitors the demo judges production with: ``gates/demo.yaml`` of the project,
    else the one shipped with driftgate."""
    from driftgate.gates.config import default_gates_path

    project = config.resolve("gates/demo.yaml")
    return project if project.is_file() else default_gates_path().with_name("demo.yaml")


def add_judged(points: list[tuple], judged: list[dict], end) -> list[str]:
    """Add the year ending at ``end`` to ``points`` and return its table lines.

    Beside that year, the check judges again the earlier years whose late labels arrived
    with this year's replay (realized accuracy on all their labels): their results
    replace the first ones in the table's summary and the plots, and their rows say so.
    """
    import pandas as pd

    lines = []
    for window in judged:
        ended = pd.Timestamp(window["window"][1])
        again = ended != end
        row, *actions = window_lines(window)
        lines += [f"{row}  (judged again: late labels)" if again else row, *actions]
        if not again:
            points.append((ended, window["metrics"], window["monitors"], window["model_version"]))
            continue
        for index, (when, metrics, monitors, version) in enumerate(points):
            if when == ended:
                merged_metrics = {**metrics, **window["metrics"]}
                merged_monitors = {**monitors, **window["monitors"]}
                points[index] = (when, merged_metrics, merged_monitors, version)
    return lines


def window_lines(window: dict) -> list[str]:
    """One table row for a judged window, then the actions it took (one line each)."""
    monitors = window["monitors"]

    def shown(name: str, key: str, form: str) -> str:
        value = (monitors.get(name) or {}).get(key)
        if key == "estimate":  # CBPE's estimate is in its details, even when insufficient
            value = (monitors.get(name) or {}).get("details", {}).get("estimate")
        width = int(form.split(".")[0].rstrip("d%fg"))
        missing = value is None or isinstance(value, str)
        return "-".rjust(width) if missing else format(value, form)

    span = f"{window['window'][0][:10]}..{window['window'][1][:10]}"
    breached = ", ".join(window["breached"]) or "-"
    if window["insufficient_data"]:  # never a pass, never a breach: said as such
        breached += f" (insufficient data: {', '.join(window['insufficient_data'])})"
    if not window["rows"]:
        breached += " (no accepted samples)"
    row = (
        f"{span:<22} {window['rows']:>4} {shown(REFUSED, 'observed', '7.1%')} "
        f"{shown(RECEIVED, 'observed', '8.2g')} {shown(OUTPUTS, 'observed', '9.2g')} "
        f"{shown(ESTIMATED, 'estimate', '8.3f')} {shown(REALIZED, 'realized', '8.3f')} "
        f"{shown(REALIZED, 'labels', '6d')}  {breached}"
    )
    actions = [f"{'':<24}-> {a['detail'][:150]}" for a in window["actions"] if a["changed"]]
    return [row, *actions]


def first_retrain_end(config: ProjectConfig):
    """The end of the window the first retrain answered (None without a retrain)."""
    import pandas as pd

    store = retrain_store(config)
    try:
        started = store.list(config.model.name)
    finally:
        store.close()
    ends = [pd.Timestamp(retrain.window[1]) for retrain in started]
    return min(ends) if ends else None


def realized_summary_lines(
    points: list[tuple], production, target: str, first_retrain=None
) -> list[str]:
    """Realized accuracy per year with the version that served it, what always
    answering the year's majority class would have scored and the refused share; then
    the mean before and after the first retrain's champion took over, the mean over
    every year after the first retrain's window (``first_retrain``: its end) whatever
    served it, and the refused share of the last five years (issue 29's measures)."""
    import pandas as pd

    lines = ["", "realized accuracy per year (labelled answered days), by the version serving,"
             " and the share of received requests the contract refused:"]  # fmt: skip
    lines.append(
        f"{'year ending':<12} {'version':>7} {'realized':>8} {'majority':>8} {'refused':>8}"
    )
    dates = production["date"]
    before, after, first, refusals = [], [], points[0][3] if points else None, []
    for end, _, monitors, version in points:
        realized = (monitors.get(REALIZED) or {}).get("realized")
        refused = (monitors.get(REFUSED) or {}).get("observed")
        refusals.append(refused if isinstance(refused, float) else None)
        days = production[(dates >= (end - pd.Timedelta(days=365)).tz_localize(None))
                          & (dates < end.tz_localize(None))]  # fmt: skip
        share = float((days[target] == days[target].mode().iloc[0]).mean()) if len(days) else None
        shown = "-" if not isinstance(realized, float) else f"{realized:.3f}"
        majority = "-" if share is None else f"{share:.3f}"
        refused_shown = "-" if refusals[-1] is None else f"{refusals[-1]:.1%}"
        lines.append(
            f"{end:%Y-%m-%d}   {'v' + str(version):>7} {shown:>8} {majority:>8} {refused_shown:>8}"
        )
        if isinstance(realized, float):
            (before if str(version) == str(first) else after).append(realized)
    served = ((f"served by the first champion v{first}", before),
              ("served by retrained champions", after))  # fmt: skip
    for label, values in served:
        if values:
            lines.append(
                f"mean realized accuracy {label}: {sum(values) / len(values):.3f} "
                f"({len(values)} years)"
            )
    if first_retrain is not None:
        later = [
            realized
            for (end, _, monitors, _) in points
            if end > first_retrain
            and isinstance(realized := (monitors.get(REALIZED) or {}).get("realized"), float)
        ]
        if later:
            lines.append(
                f"mean realized accuracy after the first retrain (its window ended "
                f"{first_retrain:%Y-%m-%d}): {sum(later) / len(later):.3f} ({len(later)} years)"
            )
    last = [share for share in refusals[-5:] if share is not None]
    if last:  # issue 29's other measure: the refused traffic comes down
        lines.append(
            f"refused share of the last {len(last)} years (mean of the yearly windows): "
            f"{sum(last) / len(last):.1%}"
        )
    return lines


def say_retrains(config: ProjectConfig, say: Say) -> None:
    """Each retrain a monitor started: its window, data, candidate and what the gate said."""
    store = retrain_store(config)
    try:
        started = store.list(config.model.name)
    finally:
        store.close()
    for retrain in reversed(started):  # oldest first
        say(
            f"  retrain {retrain.id} for {retrain.monitor} on "
            f"{retrain.window[0][:10]}..{retrain.window[1][:10]}: {retrain.outcome}"
        )
        if retrain.gate_report:
            say(f"    gate report: {retrain.gate_report}")


# -- the closed loop: serve, replay production, check each window, act -------------------

# The upstream fault injected into the replay: one sensor goes silent on a third of the
# days of one year, which the missing-values monitor (over 5%) must catch.
FAULT_FEATURE = "dew_point"
FAULT_YEAR = 1978
FAULT_EVERY = 3
# Labels arrive this long (event time) after the request they label, as a rain gauge
# read at the month's end would: every yearly window has its labels when it is judged.
LABEL_DELAY_DAYS = 30


def start_service(
    config_path: str | None, port: int, log_path, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """``driftgate serve`` in a child process (real HTTP on loopback); ``env`` is added
    to this process's environment (e.g. the admin token)."""
    command = [
        sys.executable,
        "-m",
        "driftgate.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if config_path:
        command += ["--config", config_path]
    log_file = open(log_path, "ab")  # noqa: SIM115 - owned by the child process
    return subprocess.Popen(
        command, stdout=log_file, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )


def wait_until_ready(base_url: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service exited with code {process.returncode}")
        try:
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"service at {base_url} not ready after {timeout:.0f} s")


def stop_service(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class ProductionReplay:
    """POST production days in date order, with each date as event time, through the
    same sender as ``driftgate replay`` (:class:`driftgate.jobs.replay.ReplaySender`).

    Until ``fault_fixed``, days of ``FAULT_YEAR`` lose ``FAULT_FEATURE`` on every
    ``FAULT_EVERY``-th day (null). Each answered day's label (its ``target``) goes to
    ``POST /feedback`` once the replay is ``LABEL_DELAY_DAYS`` past it, in batches; the
    rest at :meth:`close`. Request ids are new on every run (the demo's stores outlive
    it, and a second run replays the same days).
    """

    def __init__(self, base_url: str, features: list[str], target: str, token: str) -> None:
        import httpx
        import pandas as pd

        from driftgate.jobs.replay import ReplayCounts, ReplaySender

        self.client = httpx.Client(base_url=base_url, timeout=30)
        self.features, self.target = features, target
        self.counts = ReplayCounts()
        self.sender = ReplaySender(
            self.client, self.counts, token, pd.Timedelta(days=LABEL_DELAY_DAYS)
        )
        self.fault_fixed = False
        self.with_fault = 0
        self.index = 0  # position in the production period (the fault's rhythm)
        self.run = secrets.token_hex(4)

    def send(self, frame) -> None:
        for row in frame.itertuples(index=False):
            record = {name: float(getattr(row, name)) for name in self.features}
            day = row.date.tz_localize("UTC")
            faulty = day.year == FAULT_YEAR and self.index % FAULT_EVERY == 0
            if faulty and not self.fault_fixed:
                record[FAULT_FEATURE] = None
                self.with_fault += 1
            request_id = f"demo-{day:%Y-%m-%d}-{self.run}-{self.index}"
            self.index += 1
            label = int(getattr(row, self.target))
            self.sender.predict(request_id, record, day, label)
            self.sender.send_due(day)
        if len(frame):  # the year's check sees every label due by its last day
            self.sender.send_due(day, wait=True)

    def close(self) -> None:
        try:
            self.sender.send_due(None)
        finally:
            self.client.close()


def plot_performance_over_time(points: list[tuple], path) -> None:
    """Realized accuracy (labels, 95% interval) against the estimate before labels
    (CBPE, ± its sampling error) per window; below, the share of refused records."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    ends = [end for end, *_ in points]

    def series(name: str, pick) -> list:
        found = []
        for _, _, monitors, _ in points:
            result = monitors.get(name) or {}
            value = pick(result)
            found.append(float("nan") if value is None or isinstance(value, str) else value)
        return found

    realized = series(REALIZED, lambda r: r.get("realized"))
    low = series(REALIZED, lambda r: (r.get("ci") or [None, None])[0])
    high = series(REALIZED, lambda r: (r.get("ci") or [None, None])[1])
    estimated = series(ESTIMATED, lambda r: r.get("details", {}).get("estimate"))
    error = series(ESTIMATED, lambda r: r.get("details", {}).get("standard_error"))
    refused = series(REFUSED, lambda r: r.get("observed"))
    versions = [version for *_, version in points]
    figure, (top, bottom) = pyplot.subplots(
        2, 1, figsize=(10, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    top.plot(ends, realized, marker="o", label="realized accuracy (labels)")
    top.fill_between(ends, low, high, alpha=0.2, label="realized, 95% interval")
    top.errorbar(ends, estimated, yerr=error, marker="s", capsize=3,
                 label="estimated accuracy before labels (CBPE, ± sampling error)")  # fmt: skip
    for before, after, end in zip(versions, versions[1:], ends[1:], strict=False):
        if after != before:  # a retrain's candidate became the champion
            for axis in (top, bottom):
                axis.axvline(end, color="grey", linestyle="--", linewidth=1)
            top.annotate(f"champion v{after} (retrained)", (end, top.get_ylim()[0]),
                         rotation=90, va="bottom", ha="right", fontsize=8)  # fmt: skip
    top.set_ylabel("accuracy")
    top.set_title("Realized vs estimated accuracy per yearly window")
    top.legend(fontsize=8)
    bottom.bar(ends, [100 * v for v in refused], width=200, color="tab:red")
    bottom.set_ylabel("refused, % of received")
    bottom.set_xlabel("window end (event time)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def plot_drift_over_time(points: list[tuple], features: list[str], test: str, path) -> None:
    """One line per feature: ``test`` value per window end (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axis = pyplot.subplots(figsize=(10, 5))
    ends = [end for end, *_ in points]
    for feature in features:
        axis.plot(
            ends,
            [metrics.get(f"drift.{feature}.{test}") for _, metrics, *_ in points],
            marker="o",
            label=feature,
        )
    axis.set_xlabel("window end (event time)")
    axis.set_ylabel(f"{test} vs reference profile")
    axis.set_yscale("symlog", linthresh=0.1)
    axis.axhline(0.1, color="grey", linestyle="--", linewidth=1)
    axis.set_title(f"Drift over time: {test} per feature, yearly windows")
    axis.legend(fontsize=8, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
