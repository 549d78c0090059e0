"""Run ``ringlab`` commands in-process with captured output and a time limit, and judge the outcome.

An invocation is judged:

``clear``      exit status 1, 2 or 3 and one line on stderr that names the option
``unclear``    a non-zero exit, but the message is several lines or does not name the option
``accepted``   exit status 0: a bad value was taken as if it were fine
``traceback``  an exception escaped, or stderr shows a traceback or ringlab's "internal error" line
``hang``       the call ran past its time limit (SIGALRM ends it)

The counts of every outcome and the kinds of bad input are kept in ``STATS`` for the summary
that ``tests/fuzz/conftest.py`` prints at the end of the run.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import time
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass

from ringlab import cli

OUTCOMES = ("clear", "unclear", "accepted", "traceback", "hang")
STATS = {"outcomes": Counter(), "kinds": set(), "calls": 0, "json_documents": 0}


class Hang(BaseException):
    """Raised by SIGALRM inside a call that ran past its limit (BaseException: no ``except Exception`` eats it)."""


@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    error: BaseException | None
    hung: bool
    seconds: float

    def describe(self) -> str:
        return (f"exit {self.code}, {self.seconds:.2f} s, error {self.error!r}\n--- stderr ---\n{self.err[-2000:]}"
                f"\n--- stdout ---\n{self.out[-1000:]}")


MEMORY_HEADROOM = 4 * 2**30  # bytes of address space a call may add: a memory bomb fails alone, not the test run


def _limit_memory():
    """Cap this process's address space at its current size plus MEMORY_HEADROOM; return a restore function."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        return lambda: None
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = current + MEMORY_HEADROOM
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_cli(argv: list[str], timeout: float = 10.0, stdin: str = "") -> Outcome:
    """``ringlab.cli.main(argv)`` with stdout/stderr captured, stdin given, at most ``timeout`` seconds and
    ``MEMORY_HEADROOM`` more bytes of address space (Linux)."""
    out, err = io.StringIO(), io.StringIO()

    def alarm(signum, frame):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
    code, error, hung = None, None, False
    started = time.monotonic()
    restore_memory = _limit_memory()
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Hang:
        hung = True
    except BaseException as exc:  # noqa: BLE001 - exactly what the fuzz is looking for
        error = exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        restore_memory()
        signal.signal(signal.SIGALRM, previous)
        sys.stdin = old_stdin
    STATS["calls"] += 1
    return Outcome(code, out.getvalue(), err.getvalue(), error, hung, time.monotonic() - started)


def names_option(message: str, option: str) -> bool:
    """Does ``message`` name ``option`` (``--world-size``), its dest (``world_size``) or its words (``world size``)?"""
    text = message.lower()
    bare = option.lstrip("-").lower()
    return any(form in text for form in (option.lower(), bare, bare.replace("-", "_"), bare.replace("-", " ")))


def judge(outcome: Outcome, option: str) -> str:
    """One of :data:`OUTCOMES` for an invocation that was given a bad value for ``option``."""
    if outcome.hung:
        return "hang"
    if outcome.error is not None or "Traceback (most recent call last)" in outcome.err \
            or "internal error" in outcome.err:
        return "traceback"
    if outcome.code == 0:
        return "accepted"
    lines = [line for line in outcome.err.splitlines() if line.strip()]
    if outcome.code in (1, 2, 3) and len(lines) == 1 and names_option(lines[0], option):
        return "clear"
    return "unclear"


def record(kind: str, verdict: str) -> None:
    STATS["kinds"].add(kind)
    STATS["outcomes"][verdict] += 1
