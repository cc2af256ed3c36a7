"""``driftgate`` command line: every command takes ``--config PATH``.

Exit codes: 0 success, 1 a check failed, 2 bad usage, configuration or input data.
Every framework (numpy, pandas, scipy, pydantic, torch, MLflow, Great Expectations,
Evidently, Prefect, SQLAlchemy) is imported inside the commands that use it, never at
the top of this module or of :mod:`driftgate.commands`: ``driftgate --help`` used to
import scipy through the project config and the gate config, seconds before anything
was printed. ``tests/driftgate/test_cli_imports.py`` keeps it so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from driftgate.commands import pipeline as pipeline_commands
from driftgate.commands import serve as serve_commands
from driftgate.commands.adopt import adopt as adopt_command
from driftgate.commands.contract import contract_app
from driftgate.commands.deploy import deploy as deploy_command
from driftgate.commands.labels import labels_app
from driftgate.commands.monitors import monitors_app
from driftgate.commands.options import EXIT_FAILED, EXIT_REGISTRY, EXIT_USAGE, ConfigOption
from driftgate.commands.options import setup_logging as _setup_logging
from driftgate.commands.pipeline import CandidateFileOption, PreparedOption, with_prepared
from driftgate.commands.replay import replay as replay_command
from driftgate.core import collector
from driftgate.core.errors import DriftgateError
from driftgate.core.redaction import install_redacting_record_factory, redact_credentials

if TYPE_CHECKING:
    from driftgate.config import ProjectConfig

app = typer.Typer(
    name="driftgate",
    help="Train, gate, serve and monitor a PyTorch model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _every_command(
    config_path: Path | None = typer.Option(
        None,
        "--config",
        help="Project config file for the command that follows (its own --config wins).",
        dir_okay=False,
    ),
) -> None:
    """Train, gate, serve and monitor a PyTorch model."""
    # `driftgate --config X train` and `driftgate train --config X` are the same.
    # The project config's module imports pandas: not for a command that reads no config
    # (`driftgate train --help`). Not yet imported, it holds no earlier choice to reset.
    if config_path is not None or "driftgate.config" in sys.modules:
        from driftgate.config import set_default_config_file

        set_default_config_file(config_path)
    # MLflow writes "🏃 View run NAME at: URL" to stdout for every run on a tracking
    # server, with the URL as configured: a tracking URI's user:password@ included. Its
    # own switch turns the print off for every command (and the service and flows they
    # start, which inherit the environment); driftgate prints the run id itself.
    os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
    # MLflow draws a progress bar on stderr for every artifact download (a reference
    # profile, a model): noise between the lines a user reads. Still theirs to turn on.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # Every log record masked where it is made, for every command: also those that set
    # up logging themselves (`serve`) or not at all.
    install_redacting_record_factory()


def _load(config_path: Path | None) -> ProjectConfig:
    from driftgate.config import load_config

    return load_config(config_path)


def _print_training_summary(summary: dict) -> None:
    from driftgate.jobs.demo import training_summary_lines

    for line in training_summary_lines(summary):
        typer.echo(line)


def _print_where_to_look(config: ProjectConfig) -> None:
    tracking = config.tracking
    uri = redact_credentials(tracking.uri)
    typer.echo("")
    typer.echo("Where to look:")
    if uri.startswith("http"):
        typer.echo(f"  MLflow UI:  {uri}")
    else:
        typer.echo(
            f"  MLflow UI:  mlflow ui --backend-store-uri {uri} "
            f"--default-artifact-root {redact_credentials(str(tracking.artifact_location))}"
        )
        typer.echo("              then open http://127.0.0.1:5000")
    prefect_home = os.environ.get("PREFECT_HOME", str(config.home_dir / "prefect"))
    typer.echo(f"  Prefect UI: PREFECT_HOME={prefect_home} prefect server start")
    typer.echo("              then open http://127.0.0.1:4200")


@app.command()
def train(
    prepared: Path | None = PreparedOption,
    candidate_file: Path | None = typer.Option(
        None, "--candidate-file", help="Write the registered version here (JSON).", dir_okay=False
    ),
    config_path: Path | None = ConfigOption,
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Train, evaluate, log to MLflow and register a new model version (no Prefect)."""
    _setup_logging(verbose)
    config = with_prepared(_load(config_path), prepared)
    from driftgate.jobs.train import run_training

    outcome = run_training(config)
    if candidate_file is not None:
        from driftgate.jobs.pipeline import write_candidate_file

        write_candidate_file(outcome, candidate_file)
    registered = outcome.registered
    _print_training_summary(
        {
            "model_uri": registered.model_uri,
            "run_id": registered.run_id,
            "metrics": outcome.metrics,
            "data_digest": outcome.data_digest,
        },
    )


@app.command()
def demo(
    config_path: Path | None = ConfigOption,
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """The main job: the whole loop on embedded defaults, through Prefect, then where to look.

    train flow → validate-and-promote → `driftgate serve` (real HTTP) → replay the
    production period in date order (with one injected fault: a sensor going silent)
    → the drift-check flow on each yearly window → reviews and pause as the gate config
    says → a paused request gets 503 → resume → drift-over-time plots.
    """
    _setup_logging(verbose)
    config = _load(config_path)
    # Keep Prefect's local database beside MLflow's, unless the user chose otherwise;
    # set before Prefect is imported, which reads its settings then.
    os.environ.setdefault("PREFECT_HOME", str(config.home_dir / "prefect"))
    # Prefect gives its temporary local server 20 s to start; a fresh SQLite database on
    # a busy 2-core machine (an install or a test run beside it) takes longer.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    # Its usage telemetry cannot reach the internet from here, and its heartbeat's
    # write races the flows' on the local SQLite database (a "database is locked"
    # traceback on the console): off, unless the user chose otherwise.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    config.home_dir.mkdir(parents=True, exist_ok=True)
    from driftgate.flows.drift_check import drift_check_flow
    from driftgate.flows.train import train_flow
    from driftgate.jobs.demo import DemoFlows, run_demo

    flows = DemoFlows(train=train_flow, drift_check=drift_check_flow)
    config_arg = str(config_path) if config_path else None
    if not run_demo(config, config_arg, flows, say=typer.echo):
        raise typer.Exit(EXIT_FAILED)
    _print_where_to_look(config)


def _with_model(config: ProjectConfig, model: str | None) -> ProjectConfig:
    from driftgate.config import with_model_name

    return with_model_name(config, model)


@app.command()
def promote(
    model: str | None = typer.Option(None, "--model", "-m", help="Registered model name."),
    candidate: str | None = typer.Option(
        None, "--candidate", help="Version to evaluate (default: the latest)."
    ),
    gates_path: Path | None = typer.Option(
        None, "--gates", help="Gate config (default: `gates` in the project config)."
    ),
    report_dir: Path | None = typer.Option(
        None, "--report-dir", help="Where to write gate.json, gate.junit.xml, gate.md."
    ),
    prepared: Path | None = PreparedOption,
    candidate_file: Path | None = CandidateFileOption,
    summary_file: Path | None = typer.Option(
        None,
        "--summary",
        help="Write the verdict as JSON numbers (for `dvc metrics`).",
        dir_okay=False,
    ),
    no_fail: bool = typer.Option(
        False,
        "--no-fail",
        help="Exit 0 when a gate fails (the verdict is still recorded): a pipeline that "
        "keeps a rejected candidate as an outcome, like the DVC promote stage.",
    ),
    config_path: Path | None = ConfigOption,
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Run every gate on a candidate; move `champion` to it only if all pass.

    Exit 0: promoted (or already champion). 1: a gate failed, aliases untouched.
    2: bad usage or config. 3: the registry failed; aliases as they were.
    """
    _setup_logging(verbose)
    config = with_prepared(_with_model(_load(config_path), model), prepared)
    from driftgate.gates.config import load_gate_config

    gates = load_gate_config(gates_path or config.gates)
    from driftgate.jobs import pipeline
    from driftgate.jobs.promote import run_promotion

    if candidate_file is not None:
        if candidate is not None:
            raise typer.BadParameter("give --candidate or --candidate-file, not both")
        record = pipeline.read_candidate_file(candidate_file)
        if record["model_name"] != config.model.name:
            raise typer.BadParameter(
                f"{candidate_file} names model '{record['model_name']}', not '{config.model.name}'"
            )
        candidate = record["version"]
    outcome = run_promotion(config, gates, candidate=candidate, report_dir=report_dir)
    result = outcome.result
    if summary_file is not None:
        pipeline.write_gate_summary(result, outcome.promoted, summary_file)
    typer.echo(
        f"Promotion gate for {result.model_name} v{result.candidate} "
        f"(champion: {('v' + result.champion) if result.champion else 'none'})"
    )
    typer.echo(result.table())
    typer.echo("")
    for kind, path in outcome.report_files.items():
        typer.echo(f"  {kind:<9}{path}")
    if not result.passed:
        typer.echo(
            f"\nFAILED: {len(result.failures)} of {len(result.checks)} checks; aliases untouched.",
            err=True,
        )
        for failure in result.failures:
            typer.echo(f"  - {failure.name}: {failure.message}", err=True)
        raise typer.Exit(0 if no_fail else EXIT_FAILED)
    if result.champion == result.candidate:
        typer.echo(f"\nPASSED: v{result.candidate} already is the champion.")
    else:
        previous = (
            f"; previous-champion -> v{outcome.previous_champion}"
            if outcome.previous_champion
            else ""
        )
        typer.echo(f"\nPASSED: champion -> v{result.candidate}{previous}")


@app.command()
def rollback(
    model: str | None = typer.Option(None, "--model", "-m", help="Registered model name."),
    reason: str = typer.Option(..., "--reason", help="Why; recorded on the demoted version."),
    config_path: Path | None = ConfigOption,
) -> None:
    """Move `champion` back to `previous-champion`, with an audit tag."""
    config = _with_model(_load(config_path), model)
    from driftgate import registry
    from driftgate.jobs.promote import champion_lock

    with champion_lock(config):
        demoted, restored = registry.rollback_champion(config.tracking, config.model.name, reason)
    typer.echo(f"champion of {config.model.name}: v{demoted} -> v{restored} ({reason})")


def _window_option(value: str | None) -> str | None:
    """``--window`` parsed by the monitors' own parser, before any store is opened."""
    if value is None:
        return None
    from driftgate.monitors.durations import parse_duration

    try:
        parse_duration(value)  # refuses unknown units, zero, and over the maximum
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def _time_option(value: str | None) -> str | None:
    """A time option (``--end``, ``--now``) checked before any store is opened: an ISO
    time the sample store can hold. Click names the option in the message."""
    if value is None:
        return None
    from driftgate.stores.samples import storable_time, to_utc

    try:
        to_utc(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise typer.BadParameter(f"{value!r} is not an ISO time ({exc})") from None
    try:  # parses, but pandas' nanosecond arithmetic on it (a window's start) overflows
        storable_time(value)
    except (ValueError, OverflowError) as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


@app.command("drift-check")
def drift_check(
    window: str | None = typer.Option(
        None,
        "--window",
        "-w",
        help="Window length, e.g. 30m, 1h, 7d (default: each monitor's).",
        callback=_window_option,
    ),
    end: str | None = typer.Option(
        None, "--end", help="Window end, ISO time (default: now).", callback=_time_option
    ),
    monitor: list[str] = typer.Option([], "--monitor", help="Only these monitors (repeatable)."),
    source: str | None = typer.Option(
        None, "--source", help="Samples: a store URL or Parquet/CSV files (default: the service's)."
    ),
    gates_path: Path | None = typer.Option(None, "--gates", help="Gate config with the monitors."),
    config_path: Path | None = ConfigOption,
    verbose: bool = typer.Option(False, "--verbose", "-v"),
    wait_for_report: bool = typer.Option(
        False,
        "--wait-for-report",
        help="Render the Evidently report before exiting (default: in the background).",
    ),
) -> None:
    """Judge the latest window(s) of production samples and take the configured actions.

    The same logic as the scheduled drift-check flow, without Prefect. Exit 0 when no
    monitor breached, 1 when any did (its action was taken). The Evidently report of
    each window is rendered after its verdict, by a background process (its path is in
    the summary; `--wait-for-report` renders it here instead).
    """
    _setup_logging(verbose)
    config = _load(config_path)
    import driftgate.config as project_config
    from driftgate.flows.retrain import launch as launch_retrain
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.drift_check import judge_recent

    gates = load_gate_config(gates_path or config.gates)
    verdicts = judge_recent(
        config,
        gates,
        end=end,
        window=window,
        monitor_names=monitor or None,
        source=source,
        # retrain: a run of the train deployment on a configured Prefect server, else
        # in process (no Prefect server is started here)
        launcher=launch_retrain,
        # What the background report needs to read the same window again.
        report_in_background=None
        if wait_for_report
        else {
            # this command's --config, else the one before it (`driftgate --config X`)
            "config": str(Path(chosen).resolve())
            if (chosen := config_path or project_config._default_config_file)
            else "",
            "source": source or "",
        },
    )
    for verdict in verdicts:
        typer.echo(verdict.markdown())
        typer.echo(f"report: {verdict.report_dir / 'summary.md'}\n")
    if any(v.breached for v in verdicts):
        raise typer.Exit(EXIT_FAILED)


@app.command("render-report", hidden=True)
def render_report(
    start: str = typer.Option(..., "--start", callback=_time_option),
    end: str = typer.Option(..., "--end", callback=_time_option),
    version: str = typer.Option(..., "--version"),
    into: Path = typer.Option(..., "--into", file_okay=False),
    run_id: str | None = typer.Option(None, "--run-id"),
    source: str | None = typer.Option(None, "--source"),
    config_path: Path | None = ConfigOption,
) -> None:
    """The Evidently report of a judged window (what `drift-check` runs in the background)."""
    _setup_logging(False)
    config = _load(config_path)
    from driftgate.jobs.drift_check import render_window_report

    path = render_window_report(
        config, start, end, version=version, into=into, run_id=run_id, source=source
    )
    if path is None:
        raise typer.Exit(EXIT_FAILED)
    typer.echo(f"report: {path}")


reviews_app = typer.Typer(help="Reviews opened by monitors.", no_args_is_help=True)


@reviews_app.command("list")
def reviews_list(
    status: str | None = typer.Option("open", help="open, resolved, or all."),
    config_path: Path | None = ConfigOption,
) -> None:
    """List reviews, newest first."""
    config = _load(config_path)
    from driftgate.stores.factories import review_store

    store = review_store(config)
    try:
        found = store.list(status=None if status == "all" else status, model_name=config.model.name)
    finally:
        store.close()
    if not found:
        typer.echo(f"no {status} reviews for {config.model.name}")
    from driftgate.monitors.kinds import kind_of
    from driftgate.monitors.results import breach_comparison

    for review in found:
        first, last = review.last_window
        try:  # the kind of its metric says whether the stored value is a p-value
            p_value = kind_of(review.metric).observed_is_p_value(review.metric)
        except ValueError:  # a metric no kind takes now (a plugin since removed)
            p_value = False
        comparison = breach_comparison(review.observed, review.threshold, p_value)
        typer.echo(
            f"{review.id}  {review.status:<8} v{review.model_version}  {review.monitor}: "
            f"{review.metric} {comparison}  "
            f"breaches {review.breaches}  last window {first}..{last}"
        )
        features = ", ".join(review.features) or "-"
        # A proposal's diff lines are for `reviews show`; its head line says there is one.
        links = [item.split(" (", 1)[0] if item.startswith("contract revision proposed")
                 else item for item in review.evidence if not item.startswith("  ")]  # fmt: skip
        typer.echo(f"    features: {features}; evidence: {', '.join(links)}")


@reviews_app.command("show")
def reviews_show(
    review_id: str = typer.Argument(..., help="Review id (rv-...)."),
    config_path: Path | None = ConfigOption,
) -> None:
    """Show one review: its breach, windows and evidence, a proposed contract revision's
    diff included (`driftgate contract revise --from-review ID` to act on it)."""
    config = _load(config_path)
    from driftgate.stores._sql import StoreError
    from driftgate.stores.factories import review_store

    store = review_store(config)
    try:
        review = store.get(review_id)
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    finally:
        store.close()
    observed = "-" if review.observed is None else f"{review.observed:.4g}"
    lines = [
        f"review {review.id}: {review.status}, {review.model_name} v{review.model_version}",
        f"  monitor {review.monitor}: {review.metric} {observed} (threshold "
        f"{review.threshold:g}), {review.breaches} breaching windows",
        f"  first window {review.first_window[0]}..{review.first_window[1]}",
        f"  last window  {review.last_window[0]}..{review.last_window[1]}",
        f"  features: {', '.join(review.features) or '-'}",
        "  evidence:",
        *(f"    {item}" for item in review.evidence),
    ]
    if review.resolved_at:
        lines.append(
            f"  resolved by {review.resolved_by} at {review.resolved_at}: {review.resolution}"
        )
    for line in lines:
        typer.echo(line)


@reviews_app.command("resolve")
def reviews_resolve(
    review_id: str = typer.Argument(..., help="Review id (rv-...)."),
    resolution: str = typer.Option(..., "--resolution", "-r", help="What was decided."),
    by: str | None = typer.Option(None, "--by", help="Who resolves (default: your user)."),
    config_path: Path | None = ConfigOption,
) -> None:
    """Resolve a review (does not resume inference: `driftgate resume` does)."""
    import getpass

    config = _load(config_path)
    from driftgate.stores._sql import StoreError
    from driftgate.stores.factories import review_store

    store = review_store(config)
    try:
        review = store.resolve(
            review_id, by=by or f"cli:{getpass.getuser()}", resolution=resolution
        )
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    finally:
        store.close()
    typer.echo(f"{review.id} resolved by {review.resolved_by}: {review.resolution}")


samples_app = typer.Typer(help="The sample store.", no_args_is_help=True)


@samples_app.command("purge")
def samples_purge(
    now: str | None = typer.Option(
        None, "--now", help="Judge age from this ISO time (default: now).", callback=_time_option
    ),
    config_path: Path | None = ConfigOption,
) -> None:
    """Remove samples older than serving.sample_retention (not those of open reviews'
    evidence windows or of windows being judged); prints what went, as JSON."""
    import json

    config = _load(config_path)
    from driftgate.jobs.retention import purge_samples

    typer.echo(json.dumps(purge_samples(config, now=now).to_dict(), indent=2))


app.add_typer(contract_app, name="contract")
app.add_typer(labels_app, name="labels")
app.add_typer(monitors_app, name="monitors")
app.add_typer(reviews_app, name="reviews")
app.add_typer(samples_app, name="samples")
app.command()(pipeline_commands.prepare)
app.command()(pipeline_commands.evaluate)
app.command()(serve_commands.serve)
app.command()(serve_commands.pause)
app.command()(serve_commands.resume)
app.command("deploy")(deploy_command)
app.command("adopt")(adopt_command)
app.command("replay")(replay_command)


def main() -> None:
    """Console entry point: every expected failure a message and its exit code.

    Any :class:`DriftgateError` becomes one line on stderr and its ``exit_code`` (2 bad
    usage, configuration or input; 3 a store or the registry; 1 a check failed), a
    database error from a store exit code 3; nothing a user can cause ends in a
    traceback. Every message, and the traceback of a bug, has its credentials masked.
    """
    collector.for_a_command()  # the imports' objects, walked less often (core/collector.py)
    try:
        app()
    except DriftgateError as exc:
        for line in _error_lines(exc):
            typer.echo(redact_credentials(line), err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:
        from sqlalchemy.exc import DBAPIError

        if isinstance(exc, DBAPIError):
            # A store's database refused an operation it could not wrap (a lock held
            # past the busy timeout, a connection dropped mid-transaction).
            reason = str(exc.orig if exc.orig is not None else exc).splitlines()[0]
            typer.echo(redact_credentials(f"store error: database error: {reason}"), err=True)
            sys.exit(EXIT_REGISTRY)
        # A bug: the traceback is for the report, its credentials are not.
        import traceback

        typer.echo(redact_credentials(traceback.format_exc()), err=True)
        sys.exit(1)


def _error_lines(exc: DriftgateError) -> list[str]:
    from driftgate.data_contracts.breach import ContractBreach
    from driftgate.registry import RegistryError
    from driftgate.stores._sql import StoreError

    if isinstance(exc, ContractBreach):
        return [exc.report, f"refused: {exc}"]
    if isinstance(exc, RegistryError):
        return [f"registry error: {exc}"]
    if isinstance(exc, StoreError):  # e.g. another promotion holds the champion lock
        return [f"store error: {exc}"]
    return [f"error: {exc}"]


if __name__ == "__main__":
    main()
