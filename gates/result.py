"""One result type for every gate check, and the reports people and CI read.

A gate never stops at the first failure: every check runs and reports its observed
value, its threshold and why it failed, so one CI log shows everything to fix.

A check can also be *not applicable* to a candidate (a model adopted from elsewhere has
no state dict for ``reload_parity`` to reload): that is a third status, neither a pass
nor a failure. It does not fail the gate, and it is never counted or shown as a pass:
``NOT_APPLICABLE`` in the table, the Markdown and the version tags, ``skipped`` in
JUnit, ``"status": "NOT_APPLICABLE"`` (and ``passed: false``) in the JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.etree import ElementTree


@dataclass(frozen=True)
class CheckResult:
    """One check: ``observed`` compared with ``threshold`` (both printable).

    ``not_applicable``: the check does not apply to this candidate (``message`` says
    why); ``passed`` is then False, and the gate neither counts it as a pass nor fails.
    """

    name: str
    passed: bool
    observed: str
    threshold: str
    message: str = ""
    group: str = "model_checks"  # promotion | model_checks | data
    seconds: float = 0.0
    not_applicable: bool = False
    # Local files the check produced that belong with the version (the ONNX export):
    # the gate job logs them on the version's run.
    artifacts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # numpy comparisons yield numpy.bool_, which JSON and tags must not see.
        object.__setattr__(self, "passed", bool(self.passed) and not self.not_applicable)

    @property
    def status(self) -> str:
        if self.not_applicable:
            return NOT_APPLICABLE
        return "PASS" if self.passed else "FAIL"

    @property
    def failed(self) -> bool:
        return not self.passed and not self.not_applicable


NOT_APPLICABLE = "NOT_APPLICABLE"


def not_applicable(name: str, reason: str, group: str = "model_checks") -> CheckResult:
    """The result of a check that does not apply to the candidate, saying why."""
    return CheckResult(name, False, "-", "-", reason, group=group, not_applicable=True)


@dataclass
class GateResult:
    model_name: str
    candidate: str
    champion: str | None
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        applied = [check for check in self.checks if not check.not_applicable]
        return bool(applied) and not any(check.failed for check in applied)

    @property
    def failures(self) -> list[CheckResult]:
        return [check for check in self.checks if check.failed]

    @property
    def not_applicable(self) -> list[CheckResult]:
        return [check for check in self.checks if check.not_applicable]

    def to_dict(self) -> dict:
        return {
            "model_name": self.model_name,
            "candidate": self.candidate,
            "champion": self.champion,
            "passed": self.passed,
            "checks": [asdict(check) | {"status": check.status} for check in self.checks],
        }

    def table(self) -> str:
        """A fixed-width table for the CI log: check, observed, threshold, result."""
        header = ("group", "check", "observed", "threshold", "result")
        rows = [
            (
                c.group,
                c.name,
                c.observed,
                c.threshold,
                c.status + (f"  {c.message}" if not c.passed else ""),
            )
            for c in self.checks
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
        lines = [
            "  ".join(h.ljust(w) for h, w in zip(header[:4], widths, strict=True)) + "  result"
        ]
        lines.append("  ".join("-" * w for w in widths) + "  ------")
        for row in rows:
            lines.append(
                "  ".join(v.ljust(w) for v, w in zip(row[:4], widths, strict=True)) + "  " + row[4]
            )
        return "\n".join(lines)

    def markdown(self) -> str:
        verdict = (
            "PASSED"
            if self.passed
            else f"FAILED ({len(self.failures)} of {len(self.checks)} checks)"
        )
        if self.not_applicable:
            verdict += f", {len(self.not_applicable)} not applicable"
        champion = f"v{self.champion}" if self.champion else "none"
        lines = [
            f"# Promotion gate: {self.model_name} v{self.candidate} — {verdict}",
            "",
            f"Champion at evaluation: {champion}",
            "",
            "| group | check | observed | threshold | result | reason |",
            "|---|---|---|---|---|---|",
        ]
        for c in self.checks:
            cells = (c.group, c.name, c.observed, c.threshold, c.status, c.message)
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def junit_xml(self) -> str:
        suite = ElementTree.Element(
            "testsuite",
            name=f"driftgate.promote.{self.model_name}",
            tests=str(len(self.checks)),
            failures=str(len(self.failures)),
            errors="0",
            skipped=str(len(self.not_applicable)),
            time=f"{sum(c.seconds for c in self.checks):.3f}",
        )
        for c in self.checks:
            case = ElementTree.SubElement(
                suite, "testcase", classname=f"{c.group}", name=c.name, time=f"{c.seconds:.3f}"
            )
            if c.not_applicable:
                ElementTree.SubElement(case, "skipped", message=f"not applicable: {c.message}")
            elif not c.passed:
                failure = ElementTree.SubElement(case, "failure", message=c.message or "failed")
                failure.text = f"observed {c.observed}, threshold {c.threshold}"
        return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True)

    def write(self, folder: Path) -> dict[str, Path]:
        """Write ``gate.json``, ``gate.junit.xml`` and ``gate.md`` into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        files = {
            "json": folder / "gate.json",
            "junit": folder / "gate.junit.xml",
            "markdown": folder / "gate.md",
        }
        files["json"].write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        files["junit"].write_text(self.junit_xml() + "\n")
        files["markdown"].write_text(self.markdown())
        return files


def fmt(value: float | None, digits: int = 4) -> str:
    """Numbers for reports: fixed digits, NaN and None spelled out."""
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{value:.{digits}f}"
