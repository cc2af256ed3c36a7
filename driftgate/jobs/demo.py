"""``driftgate demo``: the whole loop on embedded defaults, in one module.

train flow → validate-and-promote → ``driftgate serve`` (real HTTP) → replay the
production period in date order (with one injected fault: a sensor going silent) →
the drift-check flow on each yearly window → reviews and pause as the gate config
says → a paused request gets 503 → resume → drift-over-time plots.

The flows are passed in (:class:`DemoFlows`): jobs sit below Prefect in the layers, and
the CLI, which may import both, wires them. Progress goes to ``say`` line by line;
the CLI passes ``typer.echo``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from driftgate import registry
from driftgate.config import ProjectConfig
from driftgate.jobs.data import prepare_data
from driftgate.stores.factories import control_store, review_store

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
    """Stages 2-6: serve the champion, replay production, judge each yearly window,
    show what the monitors did (a refused request, then resume), plot drift over time."""
    import httpx
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
    service = start_service(config_arg, port, reports / "service.log")
    try:
        wait_until_ready(base_url, service)
        say(f"  ready; log: {reports / 'service.log'}")

        dates = production["date"]
        say(
            f"\n== 3. replay {len(production)} production days "
            f"({dates.iloc[0]:%Y-%m-%d}..{dates.iloc[-1]:%Y-%m-%d}); fault: "
            f"{FAULT_FEATURE} silent every {FAULT_EVERY} days of {FAULT_YEAR} =="
        )
        started = time.perf_counter()
        counts = replay_production(
            base_url,
            production,
            data.features,
            progress=lambda c: say(f"  {c.sent} sent, {c.ok} stored"),
        )
        seconds = time.perf_counter() - started
        say(
            f"  {counts.sent} requests in {seconds:.1f} s ({counts.sent / seconds:.0f}/s): "
            f"{counts.ok} answered and stored, {counts.rejected} rejected (422), "
            f"{counts.unavailable} refused (503); {counts.with_fault} with the fault"
        )

        say("\n== 4. drift-check flow on each yearly window (event time) ==")
        first = production["date"].iloc[0].tz_localize("UTC")
        last = production["date"].iloc[-1].tz_localize("UTC")
        points, end = [], first + pd.Timedelta(days=365)
        while end <= last + pd.Timedelta(days=365):
            (window,) = flows.drift_check(
                config_path=config_arg, end=end.isoformat(), window="365d"
            )
            actions = "; ".join(a["detail"][:90] for a in window["actions"] if a["changed"]) or "-"
            span = f"{window['window'][0][:10]}..{window['window'][1][:10]}"
            breached = ", ".join(window["breached"]) or "-"
            if window["insufficient_data"]:  # never a pass, never a breach: said as such
                breached += f" (insufficient data: {', '.join(window['insufficient_data'])})"
            say(f"  {span}  {window['rows']:>4} rows  breached: {breached:<28} {actions}")
            points.append((end, window["metrics"]))
            end += pd.Timedelta(days=365)

        say("\n== 5. what the monitors did ==")
        reviews = review_store(config)
        for review in reviews.list(model_name=config.model.name, status="open"):
            say(
                f"  review {review.id}: {review.monitor} ({review.metric} {review.observed:.3g} > "
                f"{review.threshold:g}), {review.breaches} breaching windows, features "
                f"{', '.join(review.features)}"
            )
        reviews.close()
        # An in-contract record (from the reference period), so the answer shows the
        # pause switch and not the contract.
        record = {name: float(data.splits.test[name].iloc[0]) for name in data.features}
        refused = httpx.post(f"{base_url}/predict", json={"records": [record]}, timeout=30)
        say(f"  a request now: HTTP {refused.status_code} {refused.text[:220]}")
        control = control_store(config)
        control.resume(
            config.model.name, reason="demo: fault understood, sensor fixed", actor="demo"
        )
        control.close()
        time.sleep(max(config.serving.pause_poll_seconds, 0) + 0.5)
        restored = httpx.post(f"{base_url}/predict", json={"records": [record]}, timeout=30)
        say(f"  after `driftgate resume`: HTTP {restored.status_code}")

        say("\n== 6. drift over time ==")
        plots = reports / "plots"
        plots.mkdir(exist_ok=True)
        for test in ("kl", "missing_share"):
            path = plots / f"drift-over-time-{test}.png"
            plot_drift_over_time(points, data.features, test, path)
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


def say_plans(config: ProjectConfig, say: Say, within: int = 12) -> None:
    """What the gate config's rules promise at a real service's traffic, rather than
    the demo's yearly windows: ``driftgate monitors plan`` at one request a minute (60
    rows an hour, where KL 0.1 is too few rows to decide) and at 1,000 an hour."""
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.monitor_plan import describe, plan_monitors

    gates = load_gate_config(config.gates)
    for rows in (60, 1_000):
        say(f"\n== 7. `driftgate monitors plan --rows-per-window {rows}` ==")
        plans = plan_monitors(config, gates, rows_per_window=rows, within=within)
        for line in describe(plans, within).splitlines():
            say(f"  {line}")


# -- the closed loop: serve, replay production, check each window, act -------------------

# The upstream fault injected into the replay: one sensor goes silent on a third of the
# days of one year, which the missing-values monitor (over 5%) must catch.
FAULT_FEATURE = "dew_point"
FAULT_YEAR = 1978
FAULT_EVERY = 3


@dataclass
class ReplayCounts:
    sent: int = 0
    ok: int = 0
    rejected: int = 0
    unavailable: int = 0
    with_fault: int = 0


def start_service(config_path: str | None, port: int, log_path) -> subprocess.Popen:
    """``driftgate serve`` in a child process (real HTTP on loopback)."""
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
    return subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)


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


def replay_production(base_url: str, frame, features: list[str], progress=None) -> ReplayCounts:
    """POST every production day, in date order, with its date as event time.

    Days of ``FAULT_YEAR`` lose ``FAULT_FEATURE`` on every ``FAULT_EVERY``-th day (null).
    """
    import httpx

    counts = ReplayCounts()
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for index, row in enumerate(frame.itertuples(index=False)):
            record = {name: float(getattr(row, name)) for name in features}
            day = row.date
            if day.year == FAULT_YEAR and index % FAULT_EVERY == 0:
                record[FAULT_FEATURE] = None
                counts.with_fault += 1
            response = client.post(
                "/predict",
                json={"records": [record], "timestamp": day.tz_localize("UTC").isoformat()},
            )
            counts.sent += 1
            if response.status_code == 200:
                counts.ok += 1
            elif response.status_code == 503:
                counts.unavailable += 1
            else:
                counts.rejected += 1
            if progress is not None and counts.sent % 1000 == 0:
                progress(counts)
    return counts


def plot_drift_over_time(points: list[tuple], features: list[str], test: str, path) -> None:
    """One line per feature: ``test`` value per window end (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axis = pyplot.subplots(figsize=(10, 5))
    ends = [end for end, _ in points]
    for feature in features:
        axis.plot(
            ends,
            [metrics.get(f"drift.{feature}.{test}") for _, metrics in points],
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
