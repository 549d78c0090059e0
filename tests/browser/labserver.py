"""Start and stop a throwaway JupyterLab server for the browser tests.

The server serves a temporary copy of the notebooks, or of the course as ``make lab`` serves it (so
running them and editing exercises in the browser never touches the committed files), listens on a free
127.0.0.1 port without token or password, and keeps its config, runtime, settings, workspaces and data
folders, and the practice record, beside the copy. The kernel spec stays available: jupyter also
searches ``sys.prefix/share/jupyter``, the venv's own folder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ringlab.course.lab import lab_argv

ROOT = Path(__file__).resolve().parents[2]

# Lab settings that keep a headless run quiet and fully rendered: no news or update prompts (they
# would also try the network), and every cell in the DOM (windowing leaves off-screen cells out).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                          "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the server is told not to try others)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# What a learner's session changes in the served copy, restored by LabServer.reset_learner_state.
LEARNER_FOLDERS = ("notebooks", "exercises", "solutions")


def _copy_folder(name: str, repo: Path) -> None:
    shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))


def prepare_tree(base: Path) -> dict[str, str]:
    """Copy notebooks/, exercises/, solutions/ and tests/fixtures/nccl/ to ``base/repo``, write the lab settings
    beside it; return the server's env (Jupyter's folders and the practice record under ``base``, never the user's)."""
    repo = base / "repo"
    for name in LEARNER_FOLDERS:
        _copy_folder(name, repo)
    # notebooks read stored real runs by a path relative to themselves (16_reading_nccl)
    shutil.copytree(ROOT / "tests" / "fixtures" / "nccl", repo / "tests" / "fixtures" / "nccl")
    for name, values in LAB_SETTINGS.items():
        path = base / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTER_DATA_DIR=str(base / "data"),
        JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        IPYTHONDIR=str(base / "ipython"),
        RINGLAB_EXERCISES=str(repo / "exercises"),  # the kernel grades the copy, as a learner's checkout would
        XDG_STATE_HOME=str(base / "state"),  # ringlab.practice.state keeps the practice record there
        PYTHONUNBUFFERED="1",
    )
    env.pop("RINGLAB_USE_SOLUTIONS", None)
    return env


@dataclass
class LabServer:
    """A running server: ``url`` (no trailing slash), ``root`` (the served folder), its process."""

    url: str
    root: Path
    runtime: Path
    process: subprocess.Popen
    log: Path

    @property
    def notebooks(self) -> Path:
        """The copy's notebooks/ folder (whether the root or the notebooks are served)."""
        return self.base / "repo" / "notebooks"

    @property
    def base(self) -> Path:
        """The temporary folder holding the served copy (``repo/``) and Jupyter's and ringlab's state."""
        return self.runtime.parent

    def reset_learner_state(self) -> None:
        """Make the copy as a fresh clone is for a learner: kernels shut down, notebooks/, exercises/ and
        solutions/ copied again from the checkout, no practice record (``XDG_STATE_HOME``), no saved workspaces
        (open tabs) and no checkpoints. The server keeps running."""
        self.shutdown_kernels()
        repo = self.base / "repo"
        for name in LEARNER_FOLDERS:
            shutil.rmtree(repo / name, ignore_errors=True)
            _copy_folder(name, repo)
        for state in ("state", "workspaces"):
            shutil.rmtree(self.base / state, ignore_errors=True)
            (self.base / state).mkdir()

    def api(self, path: str, method: str = "GET"):
        """Call the REST API (no token needed); returns the decoded JSON or None."""
        req = urllib.request.Request(f"{self.url}/api/{path}", method=method)
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Shut down every running kernel, so the next notebook has the CPU to itself."""
        for kernel in self.api("kernels"):
            self.api(f"kernels/{kernel['id']}", method="DELETE")

    def stop(self) -> None:
        """Shut down kernels, then the server's process group; kill what is left of both."""
        try:
            self.shutdown_kernels()
        except (OSError, urllib.error.URLError, ValueError):
            pass  # the server may already be gone; the signals below still clean up
        _terminate_group(self.process)
        # Kernels run in sessions of their own; each one's argv names a connection file in our runtime dir.
        for pid in _pids_mentioning(str(self.runtime)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _terminate_group(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _pids_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def start_lab(base: Path, timeout: float = 90.0, course: bool = False) -> LabServer:
    """Start ``jupyter-lab`` from this venv serving ``base/notebooks``, or with ``course`` the whole copy as ``make
    lab`` serves the repository (its command line, :func:`ringlab.course.lab.lab_argv`: the root served, the start
    page open); wait until /api/status answers.

    Raises RuntimeError with the server's log when it exits or does not answer within ``timeout`` s.
    """
    env = prepare_tree(base)
    log = base / "jupyter-lab.log"
    lab = Path(sys.executable).with_name("jupyter-lab")
    served = base / "repo" if course else base / "repo" / "notebooks"
    last_error = ""
    for _ in range(3):  # the free port can be taken between probing and binding
        port = free_port()
        options = ["--no-browser", "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
                   "--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
                   "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        if course:
            cmd = lab_argv(served, *options, executable=str(lab))
        else:
            cmd = [str(lab), f"--ServerApp.root_dir={served}", *options]
            if os.geteuid() == 0:  # CI containers run as root; jupyter refuses that unless told
                cmd.append("--allow-root")
        with open(log, "ab") as out:
            process = subprocess.Popen(cmd, cwd=served, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        server = LabServer(f"http://127.0.0.1:{port}", served, base / "runtime", process, log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            try:
                server.api("status")
                return server
            except (OSError, urllib.error.URLError):
                time.sleep(0.3)
        last_error = log.read_text(errors="replace")[-3000:]
        server.stop()
        if "already in use" not in last_error:
            break
    raise RuntimeError(f"JupyterLab did not start; log tail:\n{last_error}")
