"""``ringlab bench`` under signals: SIGTERM or a killed parent leaves no rank running; the machine caps world_size."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from ringlab.dist import launch, max_local_ranks  # noqa: E402

pytestmark = pytest.mark.slow  # each test launches ranks as processes and signals them: seconds each

REPO = Path(__file__).resolve().parents[2]
LONG_BENCH = [sys.executable, "-m", "ringlab", "bench", "--world-size", "2", "--min-bytes", "16MiB",
              "--max-bytes", "16MiB", "--iters", "100000", "--warmup", "0", "--timeout", "600"]


def ranks_of(pid: int) -> list[int]:
    """Pids of the multiprocessing 'spawn' children of ``pid`` (the ranks), from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmdline:
            out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_bench() -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen(LONG_BENCH, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    ranks: list[int] = []
    while len(ranks) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        ranks = ranks_of(proc.pid)
    assert len(ranks) == 2, f"ranks did not start: {proc.poll()} {proc.stderr.read() if proc.poll() else ''}"
    time.sleep(1.0)
    return proc, ranks


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_kills_every_rank_and_exits_143():
    proc, ranks = start_bench()
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM; every rank was killed" in err and "Traceback" not in err
    assert wait_gone(ranks, 10) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_ranks_die_with_a_killed_launcher():
    proc, ranks = start_bench()
    proc.kill()  # SIGKILL: no handler runs in the parent
    proc.communicate(timeout=30)
    assert wait_gone(ranks, 10) == []


def _noop() -> int:
    return 0


def test_world_size_is_capped_by_the_machine(capsys):
    limit = max_local_ranks("gloo")
    assert 1 <= limit <= 4 * (os.cpu_count() or 1)
    with pytest.raises(ValueError, match=f"at most {limit}"):
        launch(_noop, limit + 1)
    from ringlab.cli import main

    assert main(["bench", "--world-size", str(limit + 1), "--max-bytes", "8"]) == 2
    assert "this machine can run at most" in capsys.readouterr().err


def test_csv_is_checked_before_anything_runs(capsys, tmp_path, monkeypatch):
    import multiprocessing.process

    from ringlab.cli import main

    def no_process(*args, **kwargs):
        raise AssertionError("a process was started before --csv was checked")

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", no_process)
    monkeypatch.setattr(subprocess, "Popen", no_process)
    with pytest.raises(SystemExit) as stop:
        main(["bench", "--csv", str(tmp_path / "no-such-dir" / "x.csv")])
    assert stop.value.code == 2  # refused before any rank was started
    assert "argument --csv" in capsys.readouterr().err
