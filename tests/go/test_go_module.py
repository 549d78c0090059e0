"""The course's Go module, go/ (exercise 19b): gofmt-clean, `go vet` clean, and its tests pass under the race
detector, offline (GOPROXY=off) with a writable build cache. Skipped with the reason where `go` is missing."""

import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from ringlab.check.golang import GO_MISSING, go_command, go_env

GO = Path(__file__).resolve().parents[2] / "go"

pytestmark = pytest.mark.skipif(go_command() is None, reason=GO_MISSING)


def _go(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([go_command(), *args], cwd=GO, env=go_env(), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_gofmt_and_vet_are_clean():
    fmt = subprocess.run([str(Path(go_command()).with_name("gofmt")), "-l", "."], cwd=GO, capture_output=True,
                         text=True, timeout=120)
    assert fmt.returncode == 0 and fmt.stdout == "", f"not gofmt-formatted: {fmt.stdout}{fmt.stderr}"
    vet = _go("vet", "./...")
    assert vet.returncode == 0, vet.stderr + vet.stdout


def _race_flag() -> list[str]:
    """``-race`` where it can work: it needs cgo, hence a C compiler (Debian's golang-go recommends gcc)."""
    cc = _go("env", "CC").stdout.strip() or "gcc"
    return ["-race"] if shutil.which(cc) else []


@pytest.mark.slow
def test_race_detector_suite_passes_on_the_solution_and_skips_the_stub():
    """shardstest.Run on the worked solution: every fault, the limit measured by the server, no goroutine left;
    the untouched exercise stub is skipped ("not implemented"), so `go test ./...` passes on a fresh clone.
    Under the race detector wherever a C compiler is installed."""
    done = _go("test", *_race_flag(), "-count=1", "-v", "./...")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "--- PASS: TestDownload/all_shards_at_exactly_the_limit" in done.stdout
    assert "--- SKIP: TestDownload" in done.stdout and "exercise not attempted yet" in done.stdout


def test_module_needs_nothing_outside_the_standard_library():
    mod = (GO / "go.mod").read_text()
    assert "require" not in mod and "go 1.19" in mod and "module ringlab.local/go" in mod
    listed = _go("list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...")
    assert listed.returncode == 0, listed.stderr
    ours = {"shards", "shards/solution", "shards/exercise", "shards/shardstest", "shards/cmd/fetch"}
    assert {line for line in listed.stdout.split() if line} <= {f"ringlab.local/go/{p}" for p in ours}


def test_fetch_command_refuses_bad_usage_with_exit_2(tmp_path):
    built = _go("build", "-o", str(tmp_path / "fetch"), "./shards/cmd/fetch")
    assert built.returncode == 0, built.stderr
    for args in (["-impl", "nope", "http://127.0.0.1:1/x", "d"], ["only-one-arg"], ["-timeout", "0s", "u", "d"],
                 ["-no-such-flag"]):
        done = subprocess.run([str(tmp_path / "fetch"), *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and done.stderr.strip(), (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) <= 2 or args == ["-no-such-flag"], done.stderr  # one line


def test_fetch_command_reports_the_error_and_exits_1(tmp_path):
    """Against a port nothing listens on: the connect error after the retries, exit 1, nothing written."""
    built = _go("build", "-o", str(tmp_path / "fetch"), "./shards/cmd/fetch")
    assert built.returncode == 0, built.stderr
    with socket.socket() as sock:  # a free port, closed again: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = subprocess.run([str(tmp_path / "fetch"), "-impl", "solution", "-retries", "1", "-backoff", "10ms",
                           f"http://127.0.0.1:{port}/model.safetensors.index.json", str(tmp_path / "dest")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "index model.safetensors.index.json" in done.stderr, done.stderr
    assert list((tmp_path / "dest").iterdir()) == []
