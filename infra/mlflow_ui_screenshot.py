"""Screenshots of the MLflow UI for docs/mlflow_ui.md, taken with headless Chromium.

    .venv/bin/python infra/mlflow_ui_screenshot.py
        starts `mlflow server` (infra/mlflow-server.sh) on a fresh SQLite store in a
        temporary folder, trains three versions of the demo model (weak, strong, bad)
        and runs the repository's promotion gate on each in order: weak becomes the first
        champion, strong replaces it, bad fails. About two minutes on two cores.
    .venv/bin/python infra/mlflow_ui_screenshot.py --tracking-uri http://127.0.0.1:5000 \\
        --model rainfall-classifier
        photographs a running server's store instead (it needs two versions or more).

Writes docs/img/mlflow_version_champion.png, mlflow_version_failed.png (when the latest
version is not the champion) and mlflow_compare_versions.png. Chromium comes from
Debian (`apt-get install -y chromium`); nothing is downloaded. The UI is a single-page
app: `--virtual-time-budget` lets its requests and rendering finish before the shot.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from driftgate import registry  # noqa: E402
from driftgate.config import TrackingSettings, load_config  # noqa: E402

MODEL = "rainfall-classifier"
# Overrides of params.yaml: "weak" still passes the repository's absolute gates.
VERSIONS = {
    "weak": {"hidden_sizes": [8], "max_epochs": 10},
    "strong": {},
    "bad": {"hidden_sizes": [2], "max_epochs": 1, "lr": 1e-5, "seed": 3},
}
WIDTH = 1280
MAX_HEIGHT = 6000
MAX_PNG_BYTES = 400_000


def start_server(folder: Path) -> tuple[subprocess.Popen, str]:
    """infra/mlflow-server.sh on a SQLite store in ``folder``; returns (process, uri)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{folder / 'mlflow.db'}",
        "MLFLOW_ARTIFACTS_DESTINATION": (folder / "artifacts").as_uri(),
        "MLFLOW_PORT": str(port),
        "MLFLOW_WORKERS": "1",
        "MLFLOW_BIN": str(Path(sys.executable).with_name("mlflow")),
    }
    log = open(folder / "server.log", "ab")  # noqa: SIM115 - lives as long as the server
    process = subprocess.Popen(
        ["bash", str(REPO_ROOT / "infra" / "mlflow-server.sh")],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"mlflow server exited; see {folder / 'server.log'}")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=1):
                return process, uri
        except OSError:
            time.sleep(0.5)
    process.terminate()
    raise SystemExit(f"mlflow server not up after 120 s; see {folder / 'server.log'}")


def populate(folder: Path, uri: str) -> None:
    """Train the three versions over HTTP and gate each with the repository's gates."""
    from driftgate.gates.config import load_gate_config
    from driftgate.jobs.promote import run_promotion
    from driftgate.jobs.train import run_training

    (folder / "driftgate.yaml").write_text(
        f"home: {folder / 'state'}\nmodel:\n  name: {MODEL}\n"
        f"tracking:\n  uri: {uri}\nparams: {REPO_ROOT / 'params.yaml'}\n"
    )
    config = load_config(folder / "driftgate.yaml")
    gates = load_gate_config(REPO_ROOT / "gates" / "gates.yaml")
    defaults = config.train.model_dump()
    versions = {}
    for name, overrides in VERSIONS.items():
        config.train = type(config.train)(**{**defaults, **overrides})
        versions[name] = run_training(config, on_epoch=None).registered.version
        print(f"trained {name}: v{versions[name]}", flush=True)
    for name, version in versions.items():
        outcome = run_promotion(config, gates, version, folder / "reports" / name)
        verdict = (
            "promoted"
            if outcome.promoted
            else "failed: " + ", ".join(c.name for c in outcome.result.failures)
        )
        print(f"gate v{version} ({name}): {verdict}", flush=True)


class HeadlessChromium:
    """Debian's Chromium driven over the DevTools protocol (``websockets``, already a
    dependency of Prefect): the UI is a single-page app, so each shot waits until the
    page shows the text it must show, instead of guessing a delay."""

    def __init__(self, width: int = WIDTH) -> None:
        self.width = width
        self.profile = tempfile.TemporaryDirectory(prefix="chromium-")
        chromium = shutil.which("chromium") or "/usr/bin/chromium"
        self.process = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                # No calls home: this network refuses them, and they slow every start.
                "--disable-quic",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={self.profile.name}",
                "--remote-debugging-port=0",
                f"--window-size={width},1000",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit(f"{chromium} did not open its DevTools port")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        from websockets.sync.client import connect

        self.socket = connect(page["webSocketDebuggerUrl"], max_size=None)
        self.next_id = 0
        # Keep the UI's assistant side panel closed: it would cover a third of each shot.
        self.call(
            "Page.addScriptToEvaluateOnNewDocument",
            source="localStorage.setItem('mlflow.assistant.panelOpen_v1', 'false');"
            "localStorage.setItem('mlflow.assistant.fab.autoOpenedOnFirstLoad_v1', 'true');",
        )

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=120))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def shot(
        self,
        url: str,
        path: Path,
        must_show: list[str],
        collapse: tuple[str, ...] = (),
        timeout: float = 60,
    ) -> None:
        """Open ``url``, wait until every text in ``must_show`` is on the page, fold the
        sections titled in ``collapse`` (as a reader would click them shut), unfold
        scrolling tables, and write the whole page as a small PNG."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=1000,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        wanted = json.dumps(must_show)
        while not self.evaluate(f"{wanted}.every(t => document.body.innerText.includes(t))"):
            if time.monotonic() > deadline:
                raise SystemExit(f"{url}: the page never showed all of {must_show}")
            time.sleep(0.5)
        # The assistant panel opens on a first visit whatever localStorage says: close it.
        self.evaluate(
            "document.querySelector('[data-component-id=\"mlflow.assistant.chat_panel.close\"]')"
            "?.click()"
        )
        self.evaluate(
            f"[...document.querySelectorAll('[class*=collapse-header]')]"
            f".filter(h => {json.dumps(list(collapse))}.includes(h.innerText.trim()))"
            f".forEach(h => h.click())"
        )
        # Tables scroll inside a fixed height; unfold them so the shot shows every row.
        self.evaluate(
            "document.head.insertAdjacentHTML('beforeend', '<style>"
            "[class*=table-body], table[class*=compare-table], tbody.scrollable-table"
            "{max-height:none!important;overflow:visible!important}</style>')"
        )
        time.sleep(1.5)  # let charts and the unfolded layout settle
        height = 0
        for _ in range(5):  # grow the viewport until the page stops growing with it
            content = self.evaluate(
                "Math.max(document.body.scrollHeight,"
                " ...[...document.querySelectorAll('main, main *')].map(e => e.scrollHeight))"
            )
            wanted_height = min(int(content) + 40, MAX_HEIGHT)
            if wanted_height == height:
                break
            height = wanted_height
            self.call(
                "Emulation.setDeviceMetricsOverride",
                width=self.width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            time.sleep(1.0)
        image = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(image))
        shrink(path)
        print(f"wrote {path} ({path.stat().st_size // 1024} KB, {height} px): {url}", flush=True)

    def close(self) -> None:
        self.socket.close()
        self.process.terminate()
        self.process.wait(timeout=30)
        self.profile.cleanup()


def shrink(path: Path) -> None:
    """A 256-colour palette: UI screenshots stay sharp and the PNG small."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    if path.stat().st_size > MAX_PNG_BYTES:
        raise SystemExit(f"{path} is {path.stat().st_size} bytes, over {MAX_PNG_BYTES}")


def take_screenshots(uri: str, model: str, out: Path) -> None:
    tracking = TrackingSettings(uri=uri)
    champion = registry.alias_version(tracking, model, registry.CHAMPION_ALIAS)
    latest = registry.latest_version(tracking, model)
    if int(latest) < 2:
        raise SystemExit(f"{uri}: model '{model}' has {latest} version; two or more needed")
    out.mkdir(parents=True, exist_ok=True)
    compared = [str(v) for v in range(max(1, int(latest) - 2), int(latest) + 1)]
    infos = {v: registry.version_info(tracking, model, v) for v in compared}
    runs = {v: info.run_id for v, info in infos.items()}
    experiments = sorted({info.experiment_id for info in infos.values()})
    page = f"{uri}/#/models/{urllib.parse.quote(model)}/versions"
    browser = HeadlessChromium()
    try:
        browser.shot(
            f"{page}/{champion or latest}",
            out / "mlflow_version_champion.png",
            ["Description", registry.TAG_GATE_STATUS, registry.TAG_GATE_REPORT],
        )
        if champion is not None and latest != champion:
            browser.shot(
                f"{page}/{latest}",
                out / "mlflow_version_failed.png",
                ["Description", registry.TAG_GATE_FAILED_CHECKS],
            )
        query = urllib.parse.urlencode({"name": json.dumps(model), "runs": json.dumps(runs)})
        browser.shot(
            f"{uri}/#/compare-model-versions?{query}",
            out / "mlflow_compare_versions.png",
            ["test_roc_auc", "val_roc_auc"],
        )
        query = urllib.parse.urlencode(
            {"runs": json.dumps(list(runs.values())), "experiments": json.dumps(experiments)}
        )
        browser.shot(
            f"{uri}/#/compare-runs?{query}",
            out / "mlflow_compare_runs.png",
            ["test_roc_auc", registry.TAG_GATE_STATUS],
            # Metrics are the versions shot's; this one lines the runs' tags up.
            collapse=("Visualizations", "Run details", "Parameters", "Metrics", "Artifacts"),
        )
    finally:
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracking-uri", help="a running MLflow server (default: start one)")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "img")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if args.tracking_uri:
        take_screenshots(args.tracking_uri, args.model, args.out)
        return
    with tempfile.TemporaryDirectory(prefix="mlflow-ui-") as scratch:
        folder = Path(scratch)
        process, uri = start_server(folder)
        try:
            populate(folder, uri)
            take_screenshots(uri, args.model, args.out)
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
