"""Render a ContractResult for people: Markdown (for MLflow, Prefect, PRs) and HTML.

Failures come first with their examples; passing and skipped rules follow in a table,
so the reason a batch was refused is on the first screen.
"""

from __future__ import annotations

import html
from typing import Any

from driftgate.data_contracts.batch import ContractResult, RuleResult


def _status(result: RuleResult) -> str:
    if result.skipped:
        return "skipped"
    return "pass" if result.passed else "FAIL"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, dict):
        text = ", ".join(f"{k}: {_cell(v)}" for k, v in value.items())
    elif isinstance(value, list):
        text = ", ".join(_cell(v) for v in value)
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.2%}"


def render_markdown(result: ContractResult) -> str:
    """A Markdown report: verdict, failing rules with examples, then every rule."""
    verdict = "PASSED" if result.passed else "FAILED"
    lines = [
        f"# Data contract `{result.contract}` v{result.version}: {verdict}",
        "",
        f"{result.row_count} rows, {len(result.columns)} columns; "
        f"{len(result.rules)} rules: {len(result.failures)} failed, "
        f"{len(result.skipped)} skipped ({result.seconds:.2f} s).",
        "",
    ]
    if result.failures:
        lines += ["## Failed rules", ""]
        for failure in result.failures:
            lines.append(f"- **`{failure.rule}`**: {failure.message} (expected {failure.expected})")
            for example in failure.examples:
                lines.append(f"  - row {example['row']}: `{example['value']!r}`")
        lines.append("")
    lines += [
        "## All rules",
        "",
        "| rule | status | observed | expected | unexpected share | message |",
        "|---|---|---|---|---|---|",
    ]
    for rule in result.rules:
        lines.append(
            f"| `{rule.rule}` | {_status(rule)} | {_cell(rule.observed)} | "
            f"{_cell(rule.expected)} | {_share(rule.unexpected_share)} | {_cell(rule.message)} |"
        )
    return "\n".join(lines) + "\n"


def render_html(result: ContractResult) -> str:
    """A self-contained HTML page with the same content as :func:`render_markdown`."""
    escape = html.escape
    verdict = "PASSED" if result.passed else "FAILED"
    colour = "#1a7f37" if result.passed else "#cf222e"
    rows = []
    for rule in result.rules:
        examples = "<br>".join(
            f"row {escape(str(e['row']))}: {escape(repr(e['value']))}" for e in rule.examples
        )
        style = ' style="background:#ffebe9"' if rule.failed else ""
        rows.append(
            f"<tr{style}><td><code>{escape(rule.rule)}</code></td><td>{_status(rule)}</td>"
            f"<td>{escape(_cell(rule.observed))}</td><td>{escape(rule.expected)}</td>"
            f"<td>{_share(rule.unexpected_share)}</td><td>{escape(rule.message)}</td>"
            f"<td>{examples}</td></tr>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Data contract {escape(result.contract)}</title>"
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}</style></head><body>"
        f"<h1>Data contract <code>{escape(result.contract)}</code> v{result.version}: "
        f"<span style='color:{colour}'>{verdict}</span></h1>"
        f"<p>{result.row_count} rows, {len(result.columns)} columns; {len(result.rules)} rules: "
        f"{len(result.failures)} failed, {len(result.skipped)} skipped.</p>"
        "<table><tr><th>rule</th><th>status</th><th>observed</th><th>expected</th>"
        "<th>unexpected share</th><th>message</th><th>examples</th></tr>"
        + "".join(rows)
        + "</table></body></html>\n"
    )
