"""Build a learner's Go file for a grader: find ``go``, give it a cache it can write, compile with a time limit.

Go exercises (19b) live in the course's Go module, ``go/`` (``go.mod``: module ``ringlab``, Go 1.19, standard
library only). A grader copies that module to a scratch folder, puts the learner's file in the place of the
exercise (its package clause set to the exercise's package), and builds a command of the module that calls
it. Nothing is downloaded: ``GOPROXY=off`` is set (and the learner's own ``GOFLAGS`` cleared), and the module
has no requirements. The build cache is Go's usual one (``go env GOCACHE``, so a second build is quick) unless it
cannot be written, then one under the system's temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

GO_MISSING = ("Go is needed to grade this exercise and no `go` command was found: install it (Debian/Ubuntu: "
              "`sudo apt-get install golang-go`; elsewhere https://go.dev/dl/, Go 1.19 or newer) and run it again")
BUILD_TIMEOUT_S = 600.0  # a first build compiles net/http and its dependencies: minutes on a busy machine


def go_command() -> str | None:
    """The path of ``go``, or None when it is not installed."""
    return shutil.which("go")


def _writable(folder: str) -> bool:
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def go_env() -> dict[str, str]:
    """The environment for ``go`` commands: offline (GOPROXY=off), no workspace or vendoring surprises, a
    writable build cache and module path (Go's defaults when writable, else under the temporary folder)."""
    env = dict(os.environ, GOPROXY="off", GOFLAGS="", GOWORK="off", GOTOOLCHAIN="local")
    scratch = Path(tempfile.gettempdir()) / "ringlab-go"
    for name, fallback in (("GOCACHE", scratch / "cache"), ("GOPATH", scratch / "path")):
        current = env.get(name) or _go_env_default(name)
        if not current or not _writable(current):
            env[name] = str(fallback)
    return env


def _go_env_default(name: str) -> str:
    go = go_command()
    if go is None:
        return ""
    try:
        out = subprocess.run([go, "env", name], check=False, capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, GOPROXY="off"))
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip()


def set_package(source: str, package: str) -> str:
    """``source`` with its package clause naming ``package`` (a learner's file may be named otherwise)."""
    return re.sub(r"(?m)^package\s+\w+", f"package {package}", source, count=1)


class GoBuildError(Exception):
    """The learner's Go file did not build or vet: ``message`` is go's output, paths shortened."""


def build_with(module: Path, replace: dict[str, str], command: str, out: Path, vet: str = "",
               timeout: float = BUILD_TIMEOUT_S) -> Path:
    """Copy the Go module at ``module`` to a scratch folder, write ``replace`` (module-relative path -> text)
    over it, run ``go vet`` on package ``vet`` (if given), then ``go build -o out`` the package ``command``.

    Returns ``out``. Raises GoBuildError with go's messages when vet or the build fails or runs past
    ``timeout`` seconds, and FileNotFoundError (GO_MISSING) when ``go`` is not installed.
    """
    go = go_command()
    if go is None:
        raise FileNotFoundError(GO_MISSING)
    env = dict(go_env(), CGO_ENABLED="0")  # a pure-Go build: no C compiler needed
    with tempfile.TemporaryDirectory(prefix="ringlab-go-build-") as scratch:
        copy = Path(scratch) / "go"
        shutil.copytree(module, copy, ignore=shutil.ignore_patterns("*_test.go"))
        for rel, text in replace.items():
            (copy / rel).write_text(text)
        steps = ([[go, "vet", f"./{vet}"]] if vet else []) + [[go, "build", "-o", str(out), f"./{command}"]]
        for step in steps:
            try:
                done = subprocess.run(step, check=False, cwd=copy, env=env, capture_output=True, text=True,
                                      timeout=timeout, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise GoBuildError(f"`go {step[1]}` ran for more than {timeout:g} s") from None
            if done.returncode != 0:
                text = (done.stderr + done.stdout).replace(str(copy) + os.sep, "").strip()
                lines = [line for line in text.splitlines() if not line.startswith("#")]
                raise GoBuildError(f"`go {step[1]}` failed:\n" + "\n".join(lines[:12]))
    return out
