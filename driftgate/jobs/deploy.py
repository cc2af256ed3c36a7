"""What ``driftgate deploy`` registers with a Prefect server, as plain data.

One source of truth: each monitor's cron schedule and window come from the gate config,
so editing ``gates/gates.yaml`` and re-running ``driftgate deploy`` is the only way to
change when drift checks run. Planning is Prefect-free (and fast to test); registering
the plan is :func:`flows.deployments.register_deployments`.

Deployments (flow name / deployment name):

* ``train/<model>``: train, register and gate a new version (no schedule: run on demand,
  from CI or after new data lands);
* ``validate-and-promote/<model>``: the promotion gate on the latest version (on demand);
* ``drift-check/<model>-<monitor>``: one per monitor, on the monitor's own cron schedule,
  judging the monitor's window that ends at the scheduled time;
* ``sample-retention/<model>``: hourly, when ``serving.sample_retention`` is set: samples
  older than it go (``driftgate.jobs.retention``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: `driftgate deploy --help` reads DEFAULT_WORK_POOL
    from driftgate.config import ProjectConfig
    from driftgate.gates.config import GateConfig

TRAIN_ENTRYPOINT = "driftgate.flows.train.train_flow"
PROMOTE_ENTRYPOINT = "driftgate.flows.promote.validate_and_promote"
DRIFT_CHECK_ENTRYPOINT = "driftgate.flows.drift_check.drift_check_flow"
RETENTION_ENTRYPOINT = "driftgate.flows.retention.sample_retention_flow"
CONTRACT_ENTRYPOINT = "driftgate.flows.contract_revision.revise_contract"
# Hourly, off the hour: retention is cheap and need not compete with hourly checks.
RETENTION_CRON = "17 * * * *"
DEFAULT_WORK_POOL = "driftgate"


@dataclass(frozen=True)
class DeploymentPlan:
    """One Prefect deployment: which flow, under what name, with which defaults and when.

    ``entrypoint`` is a module path (``package.module.function``): workers import the
    flow from the installed driftgate package, so no code is uploaded anywhere.
    """

    flow_name: str
    name: str
    entrypoint: str
    parameters: dict
    description: str
    cron: str | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        """``flow/deployment``, as ``prefect deployment run`` takes it."""
        return f"{self.flow_name}/{self.name}"


def plan_deployments(
    config: ProjectConfig,
    gates: GateConfig,
    *,
    config_path: Path | str | None,
    promote_after_training: bool = True,
) -> list[DeploymentPlan]:
    """The deployments for ``config``'s model: train, promote, and one drift check per monitor.

    ``config_path`` is the project config as the *worker* sees it (an absolute path on a
    shared volume or baked into the image); every run passes it to its flow. ``None``
    leaves it to the flow's default, ``./driftgate.yaml`` in the worker's folder.
    """
    check_monitors(config, gates)
    model = config.model.name
    common = {"config_path": str(config_path)} if config_path else {}
    tags = ["driftgate", f"model:{model}"]
    plans = [
        DeploymentPlan(
            flow_name="train",
            name=model,
            entrypoint=TRAIN_ENTRYPOINT,
            parameters={**common, "promote": promote_after_training},
            description=(
                f"Train and register a new version of {model}"
                + (", then run the promotion gate." if promote_after_training else ".")
            ),
            tags=tags,
        ),
        DeploymentPlan(
            flow_name="validate-and-promote",
            name=model,
            entrypoint=PROMOTE_ENTRYPOINT,
            parameters=dict(common),
            description=f"Every gate on the latest version of {model}; promote if all pass.",
            tags=tags,
        ),
    ]
    for monitor in gates.monitors:
        plans.append(
            DeploymentPlan(
                flow_name="drift-check",
                name=f"{model}-{monitor.name}",
                entrypoint=DRIFT_CHECK_ENTRYPOINT,
                parameters={**common, "monitor_names": [monitor.name]},
                description=(
                    f"Monitor {monitor.name}: {monitor.metric} over {monitor.threshold:g} on the "
                    f"last {monitor.window} -> {monitor.action} (schedule from the gate config)."
                ),
                cron=monitor.schedule,
                tags=[*tags, f"monitor:{monitor.name}", f"action:{monitor.action}"],
            )
        )
    if config.data.contract is not None:
        plans.append(
            DeploymentPlan(
                flow_name="revise-contract",
                name=model,
                entrypoint=CONTRACT_ENTRYPOINT,
                parameters=dict(common),
                description=(
                    f"Ask a person to accept or decline the contract revision a review of "
                    f"{model}'s refused traffic proposes (started by the drift check)."
                ),
                tags=tags,
            )
        )
    if config.serving.sample_retention is not None:
        plans.append(
            DeploymentPlan(
                flow_name="sample-retention",
                name=model,
                entrypoint=RETENTION_ENTRYPOINT,
                parameters=dict(common),
                description=(
                    f"Remove samples older than {config.serving.sample_retention} "
                    "(never an open review's evidence or a window being judged)."
                ),
                cron=RETENTION_CRON,
                tags=tags,
            )
        )
    return plans


def check_monitors(config: ProjectConfig, gates: GateConfig) -> None:
    """Refuse monitors naming features or contract rules this project does not have
    (ConfigError naming the monitor), before anything is scheduled.

    The features are ``data.features`` or, by default (every numeric column), the
    contract's columns: the model's own list is known only once it is trained, and the
    drift check checks against it again at its start.
    """
    from driftgate.data_contracts import Contract
    from driftgate.monitors.rules import check_monitors_against

    contract = Contract.load(config.data.contract) if config.data.contract else None
    features = config.data.features or (list(contract.columns) if contract else [])
    where = f"{Path(config.gates).name if config.gates else 'gates.yaml'}: "
    check_monitors_against(gates.monitors, features, contract, where=where)


def describe(plans: list[DeploymentPlan]) -> str:
    """A table for the terminal: name, schedule, parameters."""
    rows = [("deployment", "schedule", "parameters")]
    rows += [
        (
            plan.full_name,
            plan.cron or "on demand",
            ", ".join(f"{k}={v}" for k, v in plan.parameters.items() if k != "config_path"),
        )
        for plan in plans
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}".rstrip() for a, b, c in rows)
