"""Grade a learner's file with the learner's code in a sandboxed child process and the grader in this one.

``ringlab check`` uses :func:`grade_isolated`; notebooks keep calling :func:`ringlab.check.grade`
in-process (their cells have Jupyter's own interrupt).

How it is split. The child (:mod:`ringlab.check.sandbox_child`) imports the learner's file and does one
thing: run the learner's function (or class, or kernel) on the arguments this process sends, and send
back what it returned or raised (:mod:`ringlab.check.wire`). The grader runs here, in the parent, on
those values, so the verdict comes from code the learner's code cannot reach: writing a fake verdict to
any descriptor, printing one, patching the grader module, raising SystemExit or calling ``os._exit`` in
the child changes nothing the parent believes beyond "your function returned X" or "your code ended".
Anything malformed on the channel ends the child and is reported, never a crash here.

Time. The clock starts when the child says ``ready`` (after its interpreter, ringlab and the libraries
the learner's file imports have loaded) and counts only the time the parent waits on the learner's code,
so a busy machine slows grading but does not change a verdict. Each exercise's limit is
:func:`time_limit`: ten times what its reference solution takes (:data:`REFERENCE_SECONDS`), at least
:data:`MIN_LIMIT` seconds.

Cleanup. The child leads its own process group, which is killed (SIGKILL) once the grade is known, on
every exit of :func:`grade_isolated` (return, exception, KeyboardInterrupt) and at interpreter exit;
``ringlab check`` turns SIGTERM and SIGHUP into a normal exit so the same path runs. On Linux the kernel
also kills the child with its parent (``PR_SET_PDEATHSIG``), so a ``kill -9`` of ``ringlab check`` leaves
nothing running at 100% CPU. A verdict never waits for a background process the learner's code started:
the group is killed as soon as the grader is done.

What is and is not isolated. The learner's code runs with a scratch folder as its working directory,
holding a copy of the file; on Linux, where unprivileged user namespaces are allowed, the repository and
the learner's folder are read-only for it (``IsolatedResult.jail`` says why when not). It still runs as
the learner's user: it can read any file, write outside those folders (home, /tmp), use the network, and
a process it starts that calls ``setsid`` escapes the group kill. Exercises 03a and 11a run the learner's
function in torch.distributed ranks that their grader starts from this process; those ranks import the
learner's file outside the sandbox, and what they report is trusted. Exercise 19b is Go: its grader builds the
learner's file and runs it as a program of its own, killed at each case's time limit, with no Python child.

``IsolatedResult.outcome``:

``graded``   the grader gave a verdict (passed, wrong or not attempted)
``timeout``  the learner's code ran past the limit: the child and everything it started were killed
``exit``     the learner's code called ``sys.exit``/``os._exit`` (at import or while graded)
``crash``    the child died on a signal (segfault, out-of-memory kill...) or wrote garbage on the channel
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass
from pathlib import Path

from ringlab.validation import check_real
from ringlab.course.make_exercises import make_go_stub, make_stub

from . import wire
from .engine import not_attempted_message
from .loader import SourceFile, exercise_path, find_project_dir
from .registry import get_exercise
from .result import NOT_ATTEMPTED, WRONG, GradeResult

OUTCOMES = ("graded", "timeout", "exit", "crash")
MIN_LIMIT = 30.0  # seconds of the learner's running time, whatever the reference takes
LIMIT_FACTOR = 10.0
STARTUP_LIMIT = 300.0  # seconds for the child's interpreter and imports: not the learner's time, only a backstop
# Seconds each reference solution's code runs while graded (the parent's wait on the child), measured by
# ``python benchmarks/bench_graders.py --isolated`` on a busy 2-core machine (12a: 0.65 s there, 4 s kept for a
# first Triton interpreter run; 19a: 7.4-8.1 s at a load average of 9, nearly all of it the scripted faults'
# latencies, stalls and Retry-After waits); the limit is 10x, at least 30 s.
REFERENCE_SECONDS = {
    "01a": 0.4, "01b": 4.6, "01c": 1.9, "02a": 0.2, "02b": 0.3, "03a": 0.1, "04a": 0.1, "05a": 0.1, "06a": 0.1,
    "07a": 0.1, "08a": 0.1, "09a": 0.1, "10a": 0.1, "11a": 0.1, "12a": 4.0, "13a": 0.1, "14a": 4.7, "15a": 0.1,
    "16a": 0.3, "17a": 0.1, "17b": 0.1, "18a": 0.3, "19a": 8.0, "19b": 14.0, "20a": 0.1,
    "21a": 0.3,
}
_CHILD = Path(__file__).with_name("sandbox_child.py")
_LIVE: set[subprocess.Popen] = set()  # children not yet reaped: killed at exit whatever happens


@dataclass(repr=False)
class IsolatedResult(GradeResult):
    """A :class:`GradeResult` plus how the child process ended (one of :data:`OUTCOMES`), the time limit
    applied (seconds of the learner's running time) and, when the repository could not be made read-only for
    the learner's code, why (``jail``; empty when it was, or when no child was needed)."""

    outcome: str = "graded"
    limit: float = 0.0
    jail: str = ""
    seconds: float = 0.0  # the learner's code's running time as the parent waited on it

    def _cases_text(self) -> str:
        return super()._cases_text() if self.outcome == "graded" else f" ({self.outcome})"


def time_limit(exercise_id: str) -> float:
    """Seconds the learner's code may run for ``exercise_id``: ``max(MIN_LIMIT, 10 x REFERENCE_SECONDS)``."""
    return max(MIN_LIMIT, LIMIT_FACTOR * REFERENCE_SECONDS.get(exercise_id, 0.0))


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _definition(tree: ast.Module, name: str):
    return next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == name), None)


def untouched_stub(exercise_id: str, file: str | os.PathLike) -> str | None:
    """The stub's NotImplementedError text when ``file`` defines the exercise exactly as the generated stub
    does (compared as syntax trees, so spacing and comments do not matter), else None. Read statically: no
    learner code runs. The stub is generated from the worked solution (:mod:`ringlab.course.make_exercises`);
    without ``solutions/``, a definition whose body is only ``raise NotImplementedError(...)`` counts.
    """
    ex = get_exercise(exercise_id)
    if ex.file:
        return _untouched_source_stub(ex, file)
    try:
        mine = _definition(ast.parse(Path(file).read_bytes()), ex.function)
    except (OSError, SyntaxError, ValueError):
        return None
    if mine is None:
        return None
    solution = find_project_dir("solutions") / f"{ex.module}.py"
    try:
        stub = make_stub(solution.read_text(), {e.function: e.id for e in ex.topic.exercises if not e.file})
        reference = _definition(ast.parse(stub), ex.function)
    except (OSError, SyntaxError, ValueError):
        body = mine.body[1:] if ast.get_docstring(mine) is not None else mine.body
        reference = mine if len(body) == 1 and _stub_text(body[0]) is not None else None
    if reference is None or ast.dump(mine) != ast.dump(reference):
        return None
    return next((text for node in ast.walk(mine) if (text := _stub_text(node)) is not None), None)


def _untouched_source_stub(ex, file) -> str | None:
    """:func:`untouched_stub` for an exercise in Go (19b): ``file`` equals, up to spacing, the stub generated from
    the worked solution; the text is that of its ``errors.New(...)``."""
    try:
        mine = Path(file).read_text()
        stub = make_go_stub((find_project_dir("go").parent / ex.solution_file).read_text(), ex.id,
                            Path(ex.file).parent.name)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    found = re.search(r'errors\.New\("([^"]*)"\)', stub)
    return found.group(1) if found and mine.split() == stub.split() else None


def _stub_text(node) -> str | None:
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and \
            getattr(node.exc.func, "id", None) == "NotImplementedError":
        args = [a.value for a in node.exc.args if isinstance(a, ast.Constant)]
        return str(args[0]) if args else "NotImplementedError"
    return None


def _read_only_folders(file: Path, scratch: str) -> list[str]:
    """Folders the learner's code may not write: the repository, the package, the learner's folder."""
    home = Path.home().resolve()
    candidates = [find_project_dir("exercises").resolve().parent, Path(__file__).resolve().parents[2],
                  file.resolve().parent]
    out = []
    for folder in dict.fromkeys(candidates):
        inside = Path(scratch).resolve()
        if folder.is_dir() and folder != Path("/") and folder not in (inside, *inside.parents) \
                and folder not in (home, *home.parents):
            out.append(str(folder))
    return out


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:  # stuck in the kernel: leave it rather than hang with it
        return
    _LIVE.discard(proc)


@atexit.register
def _kill_all() -> None:
    for proc in list(_LIVE):
        _kill_group(proc)


def _as_function(handle, path: Path, info) -> types.FunctionType:
    """A plain function that forwards to ``handle`` and names the learner's file and line, for graders that
    start their own processes on the file (03a, 11a) and read its source (stub detection)."""
    name, qualname, line = info
    if not (isinstance(name, str) and name.isidentifier() and isinstance(qualname, str) and isinstance(line, int)):
        return handle

    def forward(*args, **kwargs):
        return __ringlab_remote__(*args, **kwargs)  # noqa: F821 - bound in the globals below

    code = forward.__code__.replace(co_filename=str(path), co_name=name, co_qualname=qualname,
                                    co_firstlineno=max(line, 1))
    fn = types.FunctionType(code, {"__ringlab_remote__": handle, "__builtins__": __builtins__}, name)
    fn.__qualname__, fn.__module__ = qualname, "ringlab_learner_file"
    return fn


class _Session:
    """One child: start, wait for ``ready``, import the file, grade, end. See the module docstring."""

    def __init__(self, exercise_id: str, path: Path, limit: float):
        self.wire, self.exercise_id, self.path, self.limit = wire, exercise_id, path, limit
        self.timed_out, self.exit_info, self.garbage = False, None, None
        self.scratch = tempfile.mkdtemp(prefix="ringlab-check-")
        copy = Path(self.scratch) / path.name
        shutil.copyfile(path, copy)
        ours, theirs = socket.socketpair()
        cmd = [sys.executable, "-P", str(_CHILD), str(os.getpid()), str(theirs.fileno()),
               json.dumps(_read_only_folders(path, self.scratch)), str(copy), exercise_id]
        try:
            self.proc = subprocess.Popen(cmd, cwd=self.scratch, stdin=subprocess.DEVNULL,
                                         pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        _LIVE.add(self.proc)
        self.peer = wire.Peer(ours, serves=frozenset({"call"}), remote_serves=frozenset(wire._OPS),
                              export_results=False)
        self._reader = self.peer.start_reader()
        self._done = threading.Event()
        threading.Thread(target=self._watch, name="ringlab-check-watchdog", daemon=True).start()

    def _watch(self) -> None:
        """Kill the child when the learner's time runs out, and notice its death even if a process it started
        keeps the channel open."""
        while not self._done.wait(0.02):
            if self.peer.busy_seconds() > self.limit:
                self.timed_out = True
                self.end("timeout")
            elif self.proc.poll() is not None:
                # kill what it started (which may hold the channel open); the reader then drains the messages
                # already sent (an ``exit`` report) and sees the end of the channel
                _kill_group(self.proc)
                self._reader.join(2.0)
                self.end("the child ended")

    def end(self, reason: str) -> None:
        _kill_group(self.proc)
        self.peer.close(reason)
        self._done.set()

    def next_event(self, deadline: float | None = None):
        """The next message that is not a reply: ``ready``, ``loaded``, ``exit``, ``garbage`` or ``gone``."""
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                msg = self.peer.events.get(timeout=timeout)
            except queue.Empty:
                return ("gone", "startup")
            self._note(msg)
            return msg

    def _note(self, msg) -> None:
        if msg[0] == "exit" and self.exit_info is None:
            self.exit_info = msg[1:] if len(msg) == 3 and all(type(m) is str for m in msg[1:]) else ("?", "")
            self.end("the learner's code exited")
        elif msg[0] == "garbage" and self.garbage is None:
            self.garbage = msg[1]

    def result(self, status: str, message: str, jail: str, outcome: str = "graded", **more) -> IsolatedResult:
        return IsolatedResult(self.exercise_id, get_exercise(self.exercise_id).function, status, message,
                              outcome=outcome, limit=self.limit, jail=jail, seconds=self.peer.busy_seconds(), **more)

    def ended(self, jail: str) -> IsolatedResult:
        """The result when the child ended before the grader finished."""
        self._reader.join(5.0)  # the channel is closed: every message the child sent is in the queue
        while True:
            try:
                self._note(self.peer.events.get_nowait())
            except queue.Empty:
                break
        if self.timed_out:
            return self.result(WRONG, f"timed out: your code ran for more than {self.limit:g} s (the limit for "
                               f"{self.exercise_id}), so the grader stopped it (an endless loop, or a wait that "
                               "never ends?)", jail, "timeout")
        if self.exit_info is not None:
            code, stage = self.exit_info
            return self.result(WRONG, f"exited: your file called sys.exit({code}) {stage}; remove it", jail, "exit")
        if self.garbage is not None:
            return self.result(WRONG, "crashed: the process running your code wrote something that is not a "
                               f"message on the grader's channel ({self.garbage})", jail, "crash")
        try:
            code = self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            code = -signal.SIGKILL
        if code < 0:
            return self.result(WRONG, f"crashed: the process running your code was killed by {_signal_name(-code)}",
                               jail, "crash")
        return self.result(WRONG, f"exited: your code ended the process (exit status {code}) before the grader "
                           "could report; remove sys.exit()/os._exit() calls", jail, "exit")

    def grade(self) -> IsolatedResult:
        msg = self.next_event(time.monotonic() + STARTUP_LIMIT)
        if msg[0] != "ready":
            if msg == ("gone", "startup"):
                self.end("startup")
                return self.result(WRONG, f"crashed: the grading process did not start within {STARTUP_LIMIT:g} s",
                                   "", "crash")
            return self.ended("")
        jail = msg[1] if len(msg) == 2 and type(msg[1]) is str else ""
        with self.peer.busy():  # the learner's file runs at import: its time counts
            msg = self.next_event()
        if msg[0] != "loaded" or len(msg) != 3 or type(msg[1]) is not bool or type(msg[2]) is not tuple:
            return self.ended(jail) if self.peer.gone else self._garbage(jail)
        if not msg[1]:
            kind, text = (msg[2] + ("", ""))[:2]
            if kind == "FileNotFoundError":
                return self.result(NOT_ATTEMPTED, str(text), jail)
            return self.result(WRONG, f"could not import your file: {kind}: {text}", jail)
        try:
            tree, is_function, info = msg[2]
            fn = self.peer.decode(tree)
        except (ValueError, self.wire.ProtocolError):
            return self._garbage(jail)
        if is_function is True and isinstance(info, tuple) and len(info) == 3:
            fn = _as_function(fn, self.path, info)
        try:
            graded = get_exercise(self.exercise_id).grader(fn)
        except self.wire.PeerGone:
            graded = None
        if self.peer.gone is not None or graded is None:
            return self.ended(jail)
        return self.result(graded.status, graded.message, jail, inputs=graded.inputs, traffic=graded.traffic,
                           cases=graded.cases)

    def _garbage(self, jail: str) -> IsolatedResult:
        self.garbage = self.garbage or "a malformed message"
        self.end("garbage")
        return self.ended(jail)

    def close(self) -> None:
        self.end("done")
        self.peer.sock.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def grade_isolated(exercise_id: str, file: str | os.PathLike | None = None, *,
                   timeout: float | None = None) -> IsolatedResult:
    """Grade ``exercise_id`` from ``file`` (default: the learner's exercise file) with the learner's code in a
    child process (see the module docstring).

    ``timeout``: seconds the learner's code may run (finite, > 0); default :func:`time_limit`. Never raises
    for anything the learner's code does: the result's ``outcome`` says whether the grader gave a verdict or
    the code timed out, exited or crashed (status ``wrong``, the reason in ``message``). An untouched stub is
    ``not attempted`` without starting a process. Raises ValueError for an unknown id or a bad ``timeout``.
    """
    ex = get_exercise(exercise_id)
    limit = time_limit(ex.id) if timeout is None else check_real(timeout, "timeout", min=0, min_open=True,
                                                                  max=86400 * 7)
    path = Path(file) if file is not None else exercise_path(ex.id)
    if not path.is_file():
        return IsolatedResult(ex.id, ex.function, NOT_ATTEMPTED, f"{ex.id}: no exercise file at {path}", limit=limit)
    stub = untouched_stub(ex.id, path)
    if stub is not None:
        return IsolatedResult(ex.id, ex.function, NOT_ATTEMPTED, not_attempted_message(stub), limit=limit)
    if ex.file:  # not Python (19b, Go): its grader builds the file and runs it as a process of its own, killed
        graded = ex.grader(SourceFile(ex.id, path))  # when a case runs past its deadline: no sandboxed child
        return IsolatedResult(ex.id, ex.function, graded.status, graded.message, graded.inputs, graded.traffic,
                              graded.cases, limit=limit)
    session = _Session(ex.id, path, limit)
    try:
        return session.grade()
    finally:
        session.close()
