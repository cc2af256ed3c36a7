"""What the service opens at start and closes at stop: stores, champion, threads."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from driftgate.config import ProjectConfig
from driftgate.config.serving import ADMIN_SOURCE, ServingSettings
from driftgate.core.yamlconfig import ConfigError
from driftgate.serving.champion import ChampionWatcher, freeze_long_lived
from driftgate.serving.metrics import ServiceMetrics
from driftgate.serving.pause import PauseSwitchView
from driftgate.serving.rejected import RejectedBudget
from driftgate.serving.requestlog import RequestLog
from driftgate.serving.storewatch import StoreWatch
from driftgate.serving.unlogged import UnloggedIds
from driftgate.serving.validation import build_checker
from driftgate.serving.writer import GroupCommitWriter
from driftgate.stores.control import ControlStore
from driftgate.stores.labels import LabelStore
from driftgate.stores.monitor_state import MonitorStateStore
from driftgate.stores.samples import RequestSampling, SqlSampleStore

log = logging.getLogger(__name__)

# Client keys kept per process (an identity is a peer address or a header's last entry).
MAX_CACHED_CLIENTS = 10_000


@dataclass
class ServiceState:
    """Everything the lifespan opens; handlers get it through the ``Service`` dependency."""

    settings: ServingSettings
    model_name: str
    metrics: ServiceMetrics
    samples: SqlSampleStore
    control: ControlStore
    champion: ChampionWatcher
    pause: PauseSwitchView
    writer: GroupCommitWriter
    watch: StoreWatch
    admin_token: str | None
    # Source name -> bearer token of every sender POST /feedback accepts (admin included).
    label_tokens: dict[str, str | None]
    # Which requests are logged (serving.sample_fraction, under the store's key): the
    # one decision for accepted and refused requests and for labels of unlogged ones.
    sampling: RequestSampling
    # Ids answered unlogged, so that one cannot carry a client's traffic past sampling.
    unlogged: UnloggedIds = field(default_factory=UnloggedIds)
    labels: LabelStore | None = None  # delayed labels, in the sample store's database
    # Rejected traffic and the requests log (issue 16); None when switched off.
    rejected_budget: RejectedBudget | None = None
    requests: RequestLog | None = None
    monitor_verdicts: MonitorVerdicts | None = None  # for /metrics
    # Caller identity -> its key (RequestSampling.client_key, an HMAC): a caller sends
    # many requests, and the key of an identity never changes while the store is open.
    _client_keys: dict[str, str] = field(default_factory=dict, repr=False)

    def client_key(self, identity: str) -> str:
        """The stored key of the caller ``identity``, computed once per identity (at
        most MAX_CACHED_CLIENTS kept; the cache starts over when full)."""
        key = self._client_keys.get(identity)
        if key is None:
            if len(self._client_keys) >= MAX_CACHED_CLIENTS:
                self._client_keys.clear()
            key = self._client_keys[identity] = self.sampling.client_key(identity)
        return key


def liveness_problems(svc: ServiceState) -> list[str]:
    """What only a restart can cure: a background thread that is gone."""
    problems = []
    if not svc.writer.alive:
        problems.append("the sample writer is not running")
    if not svc.watch.alive:
        problems.append("the store watch is not running")
    return problems


def readiness_problems(svc: ServiceState) -> list[str]:
    """Why the service cannot answer and record a request now (cheap: cached checks)."""
    problems = liveness_problems(svc)
    if svc.champion.current is None:
        problems.insert(0, svc.champion.last_error or "no champion loaded")
    problems.extend(svc.watch.problems())
    if svc.pause.last_error:
        problems.append(svc.pause.last_error)
    return problems


def admin_token(settings: ServingSettings) -> str | None:
    """The admin token from the environment, without surrounding whitespace.

    A token read from a file (``$(cat token)``, a Kubernetes secret) often ends in a
    newline that no client sends: it is stripped, with a warning, rather than make
    every admin request fail with 403.
    """
    raw = os.environ.get(settings.admin_token_env)
    token = (raw or "").strip() or None
    if token is None:
        log.warning("%s is not set: admin endpoints refuse every request", settings.admin_token_env)
    elif token != raw:
        log.warning(
            "%s has surrounding whitespace; it was stripped (clients send the token without it)",
            settings.admin_token_env,
        )
    return token


def label_tokens(settings: ServingSettings, admin: str | None) -> dict[str, str | None]:
    """Each label source's token from its environment variable (stripped, as the admin
    token is); a source whose variable is unset is logged and can send nothing."""
    tokens: dict[str, str | None] = {ADMIN_SOURCE: admin}
    for name, variable in settings.label_sources.items():
        token = (os.environ.get(variable) or "").strip() or None
        if token is None:
            log.warning("%s is not set: label source %r can send no labels", variable, name)
        tokens[name] = token
    shared = [n for n, t in tokens.items() if t is not None and list(tokens.values()).count(t) > 1]
    if shared:  # one token for two names: the stored source would be a guess
        raise ConfigError(
            f"serving.label_sources: {', '.join(shared)} share one token; each source "
            "needs its own, or its labels' source cannot be told"
        )
    return tokens


def open_service(
    config: ProjectConfig,
    settings: ServingSettings,
    contract_path: Callable[[], Path | None],
    metrics: ServiceMetrics,
) -> ServiceState:
    """Open the stores, read the switch, load the champion, start the threads.

    ``contract_path`` says which contract file is in effect now (None: none); the
    champion watcher asks at each poll and rebuilds the validator when it changes."""
    model_name = config.model.name
    home = config.home_dir
    admin = admin_token(settings)
    tokens = label_tokens(settings, admin)  # before anything opens: a clash is a config error
    samples = SqlSampleStore(
        settings.sample_store(home), sqlite_synchronous=settings.sqlite_synchronous
    )
    control = ControlStore(
        settings.control_store(home), sqlite_synchronous=settings.sqlite_synchronous
    )
    labels = LabelStore(settings.sample_store(home), sqlite_synchronous=settings.sqlite_synchronous)

    def on_pause_change(state) -> None:
        metrics.paused.set(1 if state.paused else 0)
        if state.paused:
            metrics.pauses.inc()

    pause = PauseSwitchView(control, model_name, settings.pause_poll_seconds, on_pause_change)
    pause.start()  # before the first request: a stored pause holds from the start

    def on_reload(outcome: str, version: str) -> None:
        metrics.model_reloads.labels(outcome).inc()
        if outcome == "loaded" and version.isdigit():
            metrics.model_version.set(int(version))

    champion = ChampionWatcher(
        config.tracking,
        model_name,
        make_checker=build_checker,
        contract=contract_path,
        poll_seconds=settings.model_poll_seconds,
        on_reload=on_reload,
        settings=settings,
    )
    champion.refresh()
    champion.start()

    watch = StoreWatch(samples, control)
    watch.start()  # before the first request: readiness is known from the start

    verdicts = MonitorVerdicts(config, settings, model_name)
    metrics.watch_monitors(verdicts)

    requests = None
    if settings.log_requests:
        requests = RequestLog(
            samples.append_requests,
            max_per_minute=settings.requests_log_max_per_minute,
            on_drop=metrics.request_log_dropped.inc,
        )

    def append(batch: list) -> int:
        # The requests log rides with the batch (one transaction, one fsync).
        logged = requests.drain() if requests is not None else []
        try:
            return samples.append([*batch, *logged], refuse_known_request_ids=True)
        except Exception:
            if logged:
                requests.give_back(logged)
            raise

    writer = GroupCommitWriter(
        append,
        max_batch_samples=settings.batch_max_samples,
        max_wait_seconds=settings.batch_max_wait_ms / 1000,
        max_pending_requests=settings.max_pending_requests,
        on_commit=metrics.record_commit,
        on_error=lambda exc: metrics.sample_write_errors.inc(),
    )
    writer.start()
    if requests is not None:
        requests.start()
    freeze_long_lived()  # after the stores' first connections: see the function
    return ServiceState(
        settings=settings,
        model_name=model_name,
        metrics=metrics,
        samples=samples,
        control=control,
        champion=champion,
        pause=pause,
        writer=writer,
        watch=watch,
        admin_token=admin,
        label_tokens=tokens,
        sampling=samples.sampling(settings.sample_fraction),
        labels=labels,
        rejected_budget=(
            RejectedBudget(settings.rejected_max_per_minute, settings.rejected_max_bytes_per_minute)
            if settings.log_rejected
            else None
        ),
        requests=requests,
        monitor_verdicts=verdicts,
    )


class MonitorVerdicts:
    """Reads the monitors' latest verdicts for ``/metrics``: the drift check keeps them
    beside its hysteresis state (``monitoring.review_store_url``, by default the control
    store). Opened at the first scrape, so a monitoring store that is down never keeps
    the service from starting.

    Only the monitors the gate config names now: the store keeps a removed monitor's
    last verdict, and its series stayed on ``/metrics`` for good (issue 30). The
    config's monitor names are read again when the file changes (its names only: no
    plugin is imported into the service); a file that cannot be read keeps the names
    read before, or, never read, every verdict (with a warning) rather than hide them.
    """

    def __init__(self, config: ProjectConfig, settings: ServingSettings, model_name: str):
        self.url = config.monitoring.review_store_url or settings.control_store(config.home_dir)
        self.sqlite_synchronous = settings.sqlite_synchronous
        self.model_name = model_name
        self.store: MonitorStateStore | None = None
        self.gates = Path(config.gates) if config.gates else None
        self.configured: tuple[int, frozenset[str]] | None = None  # (file mtime, names)
        self.unreadable = False  # warned once that the gate config cannot be read

    def __call__(self) -> list[dict]:
        if self.store is None:
            self.store = MonitorStateStore(self.url, sqlite_synchronous=self.sqlite_synchronous)
        rows = self.store.latest_statuses(self.model_name)
        names = self.monitor_names()
        return rows if names is None else [r for r in rows if r["monitor"] in names]

    def monitor_names(self) -> frozenset[str] | None:
        """The gate config's monitor names (None: the file cannot be read)."""
        from driftgate.core.yamlconfig import read_yaml_mapping
        from driftgate.gates.config import default_gates_path

        path = self.gates or default_gates_path()
        try:
            stamp = path.stat().st_mtime_ns
            if self.configured is None or self.configured[0] != stamp:
                monitors = read_yaml_mapping(path).get("monitors") or []
                names = frozenset(str(m["name"]) for m in monitors if isinstance(m, dict))
                self.configured = (stamp, names)
        except (OSError, ConfigError, KeyError, TypeError) as exc:
            if self.configured is not None:  # a file being rewritten: the names it had
                return self.configured[1]
            if not self.unreadable:
                log.warning("/metrics shows every stored monitor verdict: %s: %s", path, exc)
                self.unreadable = True
            return None
        return self.configured[1]

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


def close_service(state: ServiceState) -> None:
    """Stop polling, commit every queued sample, close the stores."""
    state.champion.stop()
    state.pause.stop()
    state.watch.stop()
    state.writer.close()
    if state.requests is not None:
        state.requests.close()
    state.samples.close()
    state.control.close()
    if state.labels is not None:
        state.labels.close()
    if state.monitor_verdicts is not None:
        state.monitor_verdicts.close()
