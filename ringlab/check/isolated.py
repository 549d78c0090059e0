"""Grade a learner's file in a child process with a time limit, so that no learner code can hang or end the grader.

``ringlab check`` uses :func:`grade_isolated`; notebooks keep calling :func:`ringlab.check.grade`
in-process (their cells have Jupyter's own interrupt). The child (``python -m ringlab.check.isolated
EXERCISE FILE FD``) imports the file, grades it and writes one JSON object to the pipe ``FD``;
the learner's prints still reach the terminal. The parent turns every other ending into a result
that says what happened, with :attr:`IsolatedResult.outcome`:

``graded``   the child reported a verdict (passed, wrong or not attempted)
``timeout``  no verdict within ``timeout`` seconds: the child and everything it started were killed
``exit``     the learner's code called ``sys.exit``/``os._exit`` (at import or while graded)
``crash``    the child died on a signal (segfault, out-of-memory kill...) or reported garbage
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from .result import NOT_ATTEMPTED, WRONG, GradeResult, TrafficRow

DEFAULT_TIMEOUT = 300.0  # seconds: the slowest grader (processes started per case) takes well under a minute
OUTCOMES = ("graded", "timeout", "exit", "crash")
_RESULT_LIMIT = 1 << 20  # bytes of verdict read back; a verdict is a few KB


class _Shown(str):
    """A value the child already rendered with repr(): shown as is, not quoted again."""

    def __repr__(self) -> str:
        return str(self)


@dataclass(repr=False)
class IsolatedResult(GradeResult):
    """A :class:`GradeResult` plus how the child process ended (one of :data:`OUTCOMES`)."""

    outcome: str = "graded"

    def _cases_text(self) -> str:
        return super()._cases_text() if self.outcome == "graded" else f" ({self.outcome})"


def _to_json(result: GradeResult, outcome: str = "graded") -> str:
    return json.dumps({
        "exercise": result.exercise, "function": result.function, "status": result.status,
        "message": result.message[:20_000], "inputs": {str(k): repr(v)[:2000] for k, v in result.inputs.items()},
        "traffic": [[t.rank, t.expected, t.reported] for t in result.traffic], "cases": result.cases,
        "outcome": outcome,
    })


def _from_json(text: str) -> IsolatedResult:
    d = json.loads(text)
    if d.get("outcome") not in OUTCOMES or not isinstance(d.get("message"), str):
        raise ValueError("not a verdict")
    return IsolatedResult(d["exercise"], d["function"], d["status"], d["message"],
                          {k: _Shown(v) for k, v in d["inputs"].items()},
                          [TrafficRow(*row) for row in d["traffic"]], int(d["cases"]), d["outcome"])


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def grade_isolated(exercise_id: str, file: str | os.PathLike | None = None, *,
                   timeout: float = DEFAULT_TIMEOUT) -> IsolatedResult:
    """Grade ``exercise_id`` from ``file`` (default: the learner's exercise file) in a child process.

    ``timeout`` in seconds (finite, > 0). Never raises for anything the learner's code does; the
    result's ``outcome`` says whether the child gave a verdict, timed out, exited or crashed, and a
    non-graded outcome has status ``wrong`` with the reason in ``message``.
    """
    from ringlab.calc.parsing import check_real

    from .registry import get_exercise

    timeout = check_real(timeout, "timeout", min=0, min_open=True, max=86400 * 7)
    function = get_exercise(exercise_id).function
    read_end, write_end = os.pipe()
    cmd = [sys.executable, "-m", "ringlab.check.isolated", exercise_id, "" if file is None else os.fspath(file),
           str(write_end)]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, pass_fds=(write_end,), start_new_session=True)
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        os.set_blocking(pipe.fileno(), False)
        data, deadline, timed_out = b"", time.monotonic() + timeout, False
        while True:
            try:
                chunk = pipe.read(65536)
            except BlockingIOError:
                chunk = None
            if chunk:
                data = (data + chunk)[:_RESULT_LIMIT]
            elif chunk == b"" and proc.poll() is not None:  # EOF and the child is gone
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            if chunk is None or chunk == b"":
                time.sleep(0.01)
    if timed_out:
        _kill_group(proc)
        return IsolatedResult(exercise_id, function, WRONG,
                              f"timed out: no verdict within {timeout:g} s, so the grader stopped your code "
                              "(an endless loop, or a wait that never ends?)", outcome="timeout")
    code = proc.wait()
    _kill_group(proc)  # anything the learner's code left running in the background
    try:
        return _from_json(data.decode("utf-8"))
    except (ValueError, KeyError, TypeError):
        pass
    if code < 0:
        return IsolatedResult(exercise_id, function, WRONG,
                              f"crashed: the process running your code was killed by {_signal_name(-code)}",
                              outcome="crash")
    return IsolatedResult(exercise_id, function, WRONG,
                          f"exited: your code ended the process (exit status {code}) before the grader "
                          "could report; remove sys.exit()/os._exit() calls", outcome="exit")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:  # stuck in the kernel: leave it rather than hang with it
        pass


def _child(exercise_id: str, file: str, fd: int) -> None:
    """Body of the child: import, grade, write the verdict to ``fd``; a SystemExit becomes an ``exit`` verdict."""
    from . import grade
    from .loader import load
    from .registry import get_exercise

    out = os.fdopen(fd, "w", encoding="utf-8")
    function = get_exercise(exercise_id).function
    stage = "while being imported"
    try:
        fn = load(exercise_id, file or None)
        stage = "while being graded"
        result, outcome = grade(exercise_id, fn), "graded"
    except SystemExit as exc:
        result = GradeResult(exercise_id, function, WRONG,
                             f"exited: your file called sys.exit({exc.code!r}) {stage}; remove it", cases=0)
        outcome = "exit"
    except FileNotFoundError as exc:
        result, outcome = GradeResult(exercise_id, function, NOT_ATTEMPTED, str(exc)), "graded"
    except Exception as exc:  # a broken import: the in-process grade() reports it the same way
        result = GradeResult(exercise_id, function, WRONG, f"could not import your file: {type(exc).__name__}: {exc}")
        outcome = "graded"
    out.write(_to_json(result, outcome))
    out.close()


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
