"""Grader for topic 19, downloading a sharded checkpoint (card 19).

* 19a ``download_shards(index_url, dest, *, concurrency, timeout, connect_timeout, read_timeout, retries,
  backoff)``, an ``async def``: run against :class:`ringlab.shards.ShardServer` with scripted faults.
* 19b ``Download(ctx, indexURL, dir, opts) error`` in Go (``go/shards/exercise/download.go``): built into
  ``go/shards/cmd/fetch`` and run against the same server and scripts (see the section "19b (Go)" below).

Every verdict comes from what the server recorded (peak requests in flight, peak TCP connections, the
connections left open, requests per shard, Range headers, the gap before each retry), from the files left
in ``dest`` (each checked against the checkpoint's sha256) and from what the function returned or raised,
never from how long it took: the scripted faults make the right outcome certain at any machine speed
(a download the server holds for 1.6 s cannot finish inside a 0.8 s deadline), and time limits are lower
bounds (a retry must wait at least the backoff) or generous windows (5 s for connections to close).

Each case's scenario targets one classic mistake, and the message names it: no limit (one task per
shard), a response never closed (its connection leaks), a semaphore permit not released on the error path,
4xx retried, no backoff, ``Retry-After`` ignored, no read timeout (only a connect timeout), the deadline
taken per request, resume from byte 0, checksum not verified, a partial file at the final path, the first
error swallowed, tasks still running after the function returned.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ringlab.shards import INDEX_NAME, ShardServer, sha256_file, write_checkpoint

from ..aio import run_async
from ..engine import CaseFailure, not_attempted_message, run_grader
from ..exercise import Exercise
from ..golang import GO_MISSING, GoBuildError, build_with, go_command, set_package
from ..result import NOT_ATTEMPTED, WRONG, GradeResult

SHARD_SIZE = 64 * 1024  # bytes of tensor data per shard: a case runs in a fraction of a second
CLOSE_WINDOW_S = 5.0  # seconds for the client's connections to close after the function returns
_GAP_SLACK = 0.95  # a retry gap is measured from the server's last byte: at least the client's wait, minus clock rounding

_CHECKPOINTS: dict[tuple[int, int], object] = {}
_ROOT: list[str] = []


def _checkpoint(shards: int, shard_size: int):
    """A checkpoint of ``shards`` shards, written once per grading process (``ringlab.shards.write_checkpoint``)."""
    key = (shards, shard_size)
    if key not in _CHECKPOINTS:
        if not _ROOT:
            _ROOT.append(tempfile.mkdtemp(prefix="ringlab-19a-"))
            atexit.register(shutil.rmtree, _ROOT[0], True)
        _CHECKPOINTS[key] = write_checkpoint(os.path.join(_ROOT[0], f"{shards}x{shard_size}"), shards=shards,
                                             shard_size=shard_size, seed=shards)
    return _CHECKPOINTS[key]


def _case(scenario: str, shards: int, faults: str, concurrency: int, timeout: float = 20.0, read_timeout: float = 5.0,
          backoff: float = 0.05, retries: int = 3) -> dict:
    return {"scenario": scenario, "shards": shards, "faults": faults, "concurrency": concurrency,
            "timeout": timeout, "connect_timeout": 5.0, "read_timeout": read_timeout, "retries": retries,
            "backoff": backoff}


def download_cases() -> list[dict]:
    """The scripted scenarios, in an order where each mistake is met early (see the module docstring)."""
    return [
        # 8 shards held 300 ms each before their headers: an unbounded client has them all in flight at once
        _case("clean", 8, "*=latency:300ms", 3),
        # first attempts answered 503: a response left unclosed holds its connection while the retry opens another
        _case("503 then ok", 6, "1#1=status:503; 2#1=status:503; 3#1=status:503; 4#1=status:503", 2, timeout=8.0),
        # first attempts answered 500: a permit not released on that path starves every other shard
        _case("500 then ok", 6, "1#1=status:500; 2#1=status:500", 2, timeout=8.0),
        # shard 1 stalls half-way, shard 2 is slow, shard 3 is missing: the first error wins and stops the rest
        _case("404", 4, "1=stall:0.5; 2=latency:500ms; 3=status:404", 2),
        _case("403", 3, "2=status:403", 2),
        _case("corrupt", 3, "2=corrupt:0.3", 2),
        # a clean close half-way: the client holds exactly half of shard 2, and resumes from there
        _case("truncated", 3, "2#1=truncate:0.5", 2),
        _case("reset", 3, "2#1=reset:0.5", 2),
        # silence half-way through shard 2: only a read timeout notices
        _case("stall", 3, "2#1=stall:0.5", 2, timeout=8.0, read_timeout=0.5),
        _case("backoff", 3, "2#1-2=status:500", 2, backoff=0.4),
        # a 503 and a 429, each asking for 1 s (Retry-After: 1)
        _case("retry-after", 3, "1#1=status:503:1; 2#1=status:429:1", 2),
        # 8 shards held 400 ms each, 2 at a time: at least 1.6 s, past the 0.8 s deadline
        _case("deadline", 8, "*=latency:400ms", 2, timeout=0.8),
    ]


def _run(fn, index_url: str, dest: str, case: dict) -> dict:
    kwargs = {k: case[k] for k in ("concurrency", "timeout", "connect_timeout", "read_timeout", "retries", "backoff")}
    return run_async(fn, index_url, dest, **kwargs)


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _is_timeout(error: BaseException | None) -> bool:
    return isinstance(error, TimeoutError) or type(error).__name__ == "TimeoutError"


def _bad_final_files(dest: str, ckpt) -> list[str]:
    """Shards present at their final path that are not complete and verified."""
    return [name for name in ckpt.files if os.path.isfile(os.path.join(dest, name))
            and sha256_file(os.path.join(dest, name)) != ckpt.sha256[name]]


def _names(ckpt, numbers) -> str:
    return ", ".join(ckpt.files[k - 1] for k in numbers)


@contextlib.contextmanager
def _scratch(exercise_id: str, shards: int):
    """The checkpoint of ``shards`` shards and a new empty folder to download it into, removed afterwards."""
    dest = tempfile.mkdtemp(prefix=f"ringlab-{exercise_id}-dest-")
    try:
        yield _checkpoint(shards, SHARD_SIZE), dest
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def check_download(fn, scenario: str, shards: int, faults: str, **case) -> None:
    """19a on one scripted scenario (``case``: the keyword arguments of the call, as :func:`_case` makes them): run
    the learner's coroutine against a fresh server, then judge."""
    with _scratch("19a", shards) as (ckpt, dest):
        with ShardServer(ckpt.folder, faults) as server:
            report = _run(fn, server.index_url, dest, case)
            still_open = server.wait_idle(CLOSE_WINDOW_S)
            records = server.records
        _judge(scenario, report, still_open, records, dest, ckpt, case, INDEX_NAME)


def _judge(scenario, report, still_open, records, dest, ckpt, case, index_name) -> None:
    error, value = report["error"], report["value"]
    if isinstance(error, NotImplementedError):  # the untouched stub: "not attempted", not wrong
        raise error
    if isinstance(error, TypeError) and "must be an async function" in str(error):
        raise CaseFailure(str(error))
    ending = _Ending(error, f"raised {_error_text(error)}" if error is not None else "returned", _is_timeout(error))
    if report["pending_count"]:
        raise CaseFailure(
            f"tasks still running after your function {ending.text.split(' ')[0]}: {report['pending_count']} "
            f"({', '.join(report['pending'])}); on the first error or the deadline cancel every task and wait "
            "for them to finish (async with asyncio.TaskGroup() does both), so nothing keeps downloading or "
            "writing once you have reported")
    _judge_run(scenario, _EXPECT[scenario], ending, still_open, records, dest, ckpt, case, _PYTHON_WORDS,
               success=lambda by_shard: _judge_success(scenario, error, value, dest, ckpt, by_shard, case, index_name),
               failure=lambda name, reason: _judge_failure(scenario, error, dest, name, reason))


_EXPECT = {"clean": "ok", "503 then ok": "ok", "500 then ok": "ok", "truncated": "ok", "reset": "ok", "stall": "ok",
           "backoff": "ok", "retry-after": "ok", "deadline": "deadline",
           "404": (3, "404"), "403": (2, "403"), "corrupt": (2, "checksum")}


@dataclass(frozen=True)
class _Ending:
    """How the learner's download ended, in the terms 19a and 19b share."""

    error: object  # what it raised (19a) or returned (19b, the error's text); None when it returned normally
    text: str  # "returned", "raised TimeoutError: ..." (19a); "returned nil", "returned the error '...'" (19b)
    timed_out: bool  # the error is the deadline's
    canceled: bool = False  # the error wraps context.Canceled (19b)
    leaks: tuple[str, ...] = ()  # what the runtime reported still running, each a verdict (19b's goroutines)


@dataclass(frozen=True)
class _Words:
    """How one language words the verdicts 19a and 19b share: ``str.format`` templates (their fields in the
    comments) and the names the shared messages use."""

    still_open: str  # {n} connections still open {window} s after the call {ended} ({verb}: its first word)
    in_flight: str  # {peak} requests at once, more than {k}
    connections: str  # {peak} TCP connections at once though at most {k} requests were in flight
    deadline_returned: str  # {shards} shards, {k} at a time, cannot arrive within {timeout} s, yet it returned
    deadline_missed: str  # it {ended} at the deadline, but not with the deadline's error
    interrupted: str  # it {ended} after Ctrl-C, but not with cancellation's error (19b only)
    retryable: str  # the failures worth another try
    rename: str  # the call that moves NAME.part to NAME
    folder: str  # the folder argument's name


_PYTHON_WORDS = _Words(
    still_open="{n} connection(s) still open {window:g} s after your function {verb}: close the client "
               "(async with httpx.AsyncClient() as client: ...)",
    in_flight="{peak} requests at once with concurrency={k}: nothing bounds the number of requests in flight (one "
              "task per shard, each requesting at once?); hold an asyncio.Semaphore(concurrency) around each request",
    connections="{peak} TCP connections open at once though at most {k} requests were in flight: a response never "
                "closed keeps its connection, so the next request opens another (a connection leak); read each "
                "response inside async with client.stream(...) as response, which closes it on every path",
    deadline_returned="returned normally, but {shards} shards that the server holds 0.4 s each, {k} at a time, "
                      "cannot all arrive inside timeout={timeout:g} s: timeout is the deadline for the whole download, "
                      "not a per-request timeout (wrap everything in async with asyncio.timeout(timeout))",
    deadline_missed="{ended}; at the deadline raise TimeoutError (asyncio.timeout does)",
    interrupted="",
    retryable="408, 429 and 5xx", rename="os.replace", folder="dest",
)


def _judge_run(scenario, expect, ending: _Ending, still_open, records, dest, ckpt, case, words: _Words, *,
               success, failure) -> None:
    """The verdicts 19a and 19b share, in this order: connections left open, ``ending.leaks``, requests and
    connections past the limit, the outcome ``expect`` names ("ok": ``success(requests by shard)`` judges it;
    "deadline"; "interrupt"; (shard number, reason): a final failure, first judged by ``failure(name, reason)``),
    no partial file at a final path, then the retries. Raises CaseFailure, in the terms of ``words``."""
    k = case["concurrency"]
    if still_open:
        raise CaseFailure(words.still_open.format(n=still_open, window=CLOSE_WINDOW_S, ended=ending.text,
                                                  verb=ending.text.split(" ")[0]))
    if ending.leaks:
        raise CaseFailure(ending.leaks[0])
    if records.peak_in_flight > k:
        raise CaseFailure(words.in_flight.format(peak=records.peak_in_flight, k=k))
    if records.peak_connections > k:
        raise CaseFailure(words.connections.format(peak=records.peak_connections, k=k))
    by_shard = records.requests_by_shard()
    if expect == "ok":
        success(by_shard)
    elif expect == "deadline":
        if ending.error is None:
            raise CaseFailure(words.deadline_returned.format(shards=len(ckpt.files), k=k, timeout=case["timeout"]))
        if not ending.timed_out:
            raise CaseFailure(words.deadline_missed.format(ended=ending.text))
    elif expect == "interrupt":
        if ending.error is None or not ending.canceled:
            raise CaseFailure(words.interrupted.format(ended=ending.text))
    else:
        number, reason = expect
        name = ckpt.files[number - 1]
        if scenario in ("404", "403") and by_shard.get(name, 0) > 1:
            raise CaseFailure(f"retried {name} {by_shard[name] - 1} time(s) after HTTP {reason}: a {reason} will "
                              f"not change, only {words.retryable} are worth another try")
        failure(name, reason)
        if name not in str(ending.error) or reason not in str(ending.error):
            raise CaseFailure(f"{ending.text}; the error should name the first failure, {name}, and its reason "
                              f"({reason!r} in the message)")
    bad = _bad_final_files(dest, ckpt)
    if bad:
        raise CaseFailure(f"a partial or unverified file at the final path {bad[0]}: write into NAME.part and "
                          f"{words.rename} it to NAME only once it is complete and its sha256 matches X-Linked-Etag")
    _judge_retries(scenario, records, ckpt, case)


def _judge_folder(dest, ckpt, index_name, folder: str) -> None:
    """After a success the folder holds the index and the shards, nothing else."""
    found = sorted(os.listdir(dest))
    wanted = sorted([index_name, *ckpt.files])
    if found != wanted:
        extra, missing = sorted(set(found) - set(wanted)), sorted(set(wanted) - set(found))
        raise CaseFailure(f"{folder} should hold the index and the shards, nothing else; "
                          + (f"extra: {extra} " if extra else "") + (f"missing: {missing}" if missing else ""))


def _judge_success(scenario, error, value, dest, ckpt, by_shard, case, index_name) -> None:
    if error is not None:
        never = [k for k, name in enumerate(ckpt.files, 1) if not by_shard.get(name)]
        if scenario == "stall" and _is_timeout(error):
            raise CaseFailure(f"raised TimeoutError at the deadline: shard 2 went silent half-way and your code "
                              f"waited for it until timeout={case['timeout']:g} s; with no read timeout (only a "
                              f"connect timeout) a stalled body is never noticed: give httpx.Timeout a "
                              f"read={case['read_timeout']:g}, then retry")
        if _is_timeout(error) and never:
            raise CaseFailure(f"raised TimeoutError: {_names(ckpt, never)} never requested although every "
                              "failure here is retryable: the first attempts failed and their permits were "
                              "never given back (a semaphore not released on the error path); use async with "
                              "semaphore: so every exit releases it (or, with a pool of K connections, a response "
                              "never closed)")
        raise CaseFailure(f"raised {_error_text(error)}; every fault here is retryable and all shards should arrive")
    if not isinstance(value, (list, tuple)) or list(value) != sorted(ckpt.files):
        raise CaseFailure(f"returned {value!r}; expected the sorted list of shard file names {sorted(ckpt.files)}")
    _judge_folder(dest, ckpt, index_name, _PYTHON_WORDS.folder)


def _judge_failure(scenario, error, dest, name, reason) -> None:
    if error is None:
        if scenario == "corrupt" and os.path.isfile(os.path.join(dest, name)):
            raise CaseFailure(f"returned normally and kept {name}, whose sha256 differs from its X-Linked-Etag: "
                              "checksum not verified; hash the file and compare before renaming it into place")
        raise CaseFailure(f"returned normally although {name} failed ({reason}): the first error swallowed; "
                          "raise it, naming the shard and the reason")


def _judge_retries(scenario, records, ckpt, case) -> None:
    if scenario == "truncated":
        name = ckpt.files[1]
        reqs = [r for r in records.requests if r.shard == name and r.method == "GET"]
        if len(reqs) >= 2 and reqs[1].range_start != reqs[0].bytes_sent:
            asked = "no Range header" if reqs[1].range_start is None else f"Range from byte {reqs[1].range_start}"
            raise CaseFailure(f"the first response for {name} ended after {reqs[0].bytes_sent:,} of its bytes; the "
                              f"retry asked for {asked}: resume with Range: bytes={reqs[0].bytes_sent}- "
                              "(append to the .part file), not from byte 0")
    if scenario == "backoff":
        name = ckpt.files[1]
        for n, gap in enumerate(records.retry_gaps(name), 1):
            least = 0.5 * case["backoff"] * 2 ** (n - 1)
            if gap < least * _GAP_SLACK:
                raise CaseFailure(f"retry {n} of {name} came {gap * 1e3:.0f} ms after the failure: retry without "
                                  f"backoff; wait backoff x 2**(n-1) x a random factor in [0.5, 1], at least "
                                  f"{least * 1e3:.0f} ms here")
    if scenario == "retry-after":
        for name, status in ((ckpt.files[0], 503), (ckpt.files[1], 429)):
            gaps = records.retry_gaps(name)
            if gaps and gaps[0] < 1.0 * _GAP_SLACK:
                raise CaseFailure(f"retried {name} {gaps[0] * 1e3:.0f} ms after a {status} that said "
                                  "Retry-After: 1: Retry-After ignored; wait at least what the server asks")


def _download(fn):
    return run_grader("19a", "download_shards", fn, check_download, download_cases(), None,
                      "every shard arrived complete and verified, within the limit, and every failure was "
                      "reported, cleaned up and never retried when final")


PYTHON_EXERCISES = (
    Exercise("19a", "download_shards", "Download a sharded checkpoint: limit, timeouts, retries, cancellation",
             _download, (
                 ("One asyncio.Semaphore(concurrency) around each request, one httpx.AsyncClient with "
                  "httpx.Timeout(connect=..., read=...), and asyncio.timeout(timeout) around everything: three "
                  "different clocks."),
                 ("asyncio.TaskGroup: the first task that raises cancels the others and waits for them. Stream into "
                  "NAME.part, resume with Range: bytes=<size of .part>-, and os.replace only after the sha256 "
                  "matches X-Linked-Etag."),
                 ("Per shard: for attempt in range(retries + 1): async with limit: one GET; 200/206 -> verify, "
                  "rename, return; 408/429/5xx or a transport error -> sleep max(backoff * 2**attempt * "
                  "uniform(0.5, 1), Retry-After) outside the semaphore; any other status -> raise "
                  "'NAME: HTTP 404'."),
             )),
)

# ---- 19b (Go)
# The learner's go/shards/exercise/download.go is built into the module's command go/shards/cmd/fetch (with
# ringlab.check.golang) and run once per case against the same server scripts as 19a, plus two cases Go needs:
# a slow but live shard, and Ctrl-C. The program prints one JSON line when Download returns (its error, whether
# that wraps context.DeadlineExceeded or context.Canceled, and the goroutines Download started that still run 5 s
# later: in the learner's code, in net/http's connection loops, elsewhere), then waits for its stdin to close, so
# the server can count the connections left open while the process still lives. Every verdict comes from those
# records, as for 19a.

GO_FILE_IN_MODULE = "shards/exercise/download.go"  # where the learner's file goes in a copy of go/
GO_COMMAND = "shards/cmd/fetch"
GO_SLACK_S = 60.0  # seconds past a case's deadline before a Download that has not returned is called hung
_GO_EXPECT = {**_EXPECT, "slow": "ok", "interrupt": "interrupt"}


def go_cases() -> list[dict]:
    """19a's scenarios with two more, a shard that trickles (no gap near the read timeout, 2 s in all) and a
    Ctrl-C, in an order where each mistake fails fast: the scenarios whose mistakes would otherwise run on to a
    deadline (a stall, a 403 that must stop the download) come before those that take seconds to pass."""
    cases = {case["scenario"]: case for case in download_cases()}
    # shard 2 at 32 KiB/s: about 2 s in all, a write every 1/32 s; a 1 s read timeout must not cut it
    cases["slow"] = _case("slow", 3, "2=throttle:32KiB/s", 2, read_timeout=1.0)
    # every shard goes silent half-way; SIGINT (Ctrl-C) once the first shard request has come
    cases["interrupt"] = _case("interrupt", 4, "*=stall:0.5", 2)
    first = ["clean", "slow", "stall", "403"]
    return [cases[name] for name in first if name in cases] + [c for name, c in cases.items() if name not in first]


def _go_flags(case: dict) -> list[str]:
    return [f"-concurrency={case['concurrency']}", f"-timeout={case['timeout']}s",
            f"-connect-timeout={case['connect_timeout']}s", f"-read-timeout={case['read_timeout']}s",
            f"-retries={case['retries']}", f"-backoff={case['backoff']}s", "-backoff-max=10s"]


def _read_report(proc, seconds: float) -> str | None:
    """The program's report line, which it prints once Download has returned, within ``seconds``; or None.
    Lines the learner's code printed before it are skipped."""
    data, end = b"", time.monotonic() + seconds
    fd = proc.stdout.fileno()
    while True:
        while b"\n" in data:
            line, data = data.split(b"\n", 1)
            if line.startswith(b'{"error":'):
                return line.decode(errors="replace")
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        data += chunk


def _run_go(program: str, server, dest: str, case: dict, interrupt: bool):
    """Run the built program on one case: its JSON report (None if it hung or ended first), the connections
    still open and the server's records, both taken CLOSE_WINDOW_S after Download returned while the program
    still lives, and, when it ended without a report, why (its exit status and the end of its stderr: a panic)."""
    stderr = tempfile.TemporaryFile()
    proc = subprocess.Popen([program, "-json", "-hold", *_go_flags(case), server.index_url, dest],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True)
    try:
        if interrupt:  # Ctrl-C once a shard is being sent: Download is running, its signal handler in place
            end = time.monotonic() + GO_SLACK_S
            while not any(r.shard for r in server.records.requests) and time.monotonic() < end \
                    and proc.poll() is None:
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
        line = _read_report(proc, case["timeout"] + GO_SLACK_S)
        report = None if line is None else json.loads(line)
        ended = ""
        if report is None:
            with contextlib.suppress(subprocess.TimeoutExpired):  # its stdout closed: it is ending
                proc.wait(5.0)
        if report is None and proc.poll() is not None:
            stderr.seek(0)
            tail = stderr.read().decode(errors="replace").strip().splitlines()[:8]
            ended = f"exit status {proc.returncode}" + (": " + " | ".join(tail) if tail else "")
        # the program waited up to 5 s for its goroutines; with its own still running, that is the verdict
        window = 0.0 if report is None or report.get("leaked_code") else CLOSE_WINDOW_S
        return report, server.wait_idle(window), server.records, ended
    finally:
        stderr.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            pipe.close()


def check_go_download(program: str, scenario: str, shards: int, faults: str, **case) -> None:
    """19b on one scripted scenario (``case``: the program's options, as for 19a): run the built program against a
    fresh server, then judge."""
    with _scratch("19b", shards) as (ckpt, dest):
        with ShardServer(ckpt.folder, faults) as server:
            report, still_open, records, ended = _run_go(program, server, dest, case, scenario == "interrupt")
        if ended:
            raise CaseFailure(f"the program ended before Download returned ({ended[:600]}): a panic, or os.Exit, "
                              "in your code")
        if report is None:
            raise CaseFailure(f"Download had not returned {GO_SLACK_S:g} s after its deadline (timeout="
                              f"{case['timeout']:g} s): something waits for what never comes (a semaphore slot never "
                              "given back, a WaitGroup never Done, a channel never closed, a read with no timeout that "
                              "ignores ctx)")
        _judge_go(scenario, report, still_open, records, dest, ckpt, case, INDEX_NAME)


_GO_WORDS = _Words(
    still_open="{n} connection(s) still open {window:g} s after Download {ended}: a response body never closed "
               "keeps its connection (defer resp.Body.Close() as soon as Do returns without error, on every path, "
               "error statuses too), and idle keep-alive connections outlive the call unless closed "
               "(transport.CloseIdleConnections())",
    in_flight="{peak} requests at once with Concurrency={k}: no limit (a goroutine per shard, each requesting at "
              "once?); start Concurrency workers that take shards from a channel, or hold a slot of a buffered "
              "channel around each request",
    connections="{peak} TCP connections open at once though at most {k} requests were in flight: a response body "
                "never closed keeps its connection, so the next request dials another (defer resp.Body.Close() on "
                "every path, error statuses too)",
    deadline_returned="returned nil, but {shards} shards that the server holds 0.4 s each, {k} at a time, cannot "
                      "all arrive before a {timeout:g} s deadline",
    deadline_missed="{ended} at ctx's deadline: wrap ctx.Err() (fmt.Errorf(\"shard %s: %w\", name, ctx.Err())) so "
                    "that errors.Is(err, context.DeadlineExceeded) holds",
    interrupted="{ended} after Ctrl-C cancelled ctx: return an error wrapping ctx.Err() so that errors.Is(err, "
                "context.Canceled) holds",
    retryable="429 and 5xx (and broken connections)", rename="os.Rename", folder="dir",
)


def _judge_go(scenario, report, still_open, records, dest, ckpt, case, index_name) -> None:
    error = report["error"]
    ended = "returned nil" if error is None else f"returned the error {error!r}"
    if error is not None and "not implemented" in error:
        raise NotImplementedError(error)
    code = report.get("leaked_code") or []
    answering = sorted({r.shard or r.path for r in records.requests if r.end is None})
    if code or answering:
        what = (f"{', '.join(code)} still running 5 s after Download {ended}" if code else
                f"requests for {', '.join(answering)} still in flight {CLOSE_WINDOW_S:g} s after Download {ended}")
        raise CaseFailure(f"{what}: goroutines still running after cancel; on the first error or ctx's end, cancel "
                          "the context the workers' requests use, and wait for them (sync.WaitGroup) before "
                          "returning, so nothing keeps downloading or writing once you have reported")
    leaks = []
    if report.get("leaked_connections"):
        leaks.append(f"{report['leaked_connections']} goroutine(s) of net/http's connections still running 5 s "
                     f"after Download {ended}: a response body never closed (defer resp.Body.Close() as soon "
                     "as Do returns without error, on every path, error statuses too), or connections kept "
                     "(transport.CloseIdleConnections() on return; a dial that completes after its request "
                     "was cancelled joins the idle pool later: close what your DialContext opened)")
    if report.get("leaked_other", 0) > 0:
        leaks.append(f"{report['leaked_other']} goroutine(s) still running 5 s after Download {ended}: on the first "
                     "error or ctx's end, cancel the others' context and wait for them (sync.WaitGroup) before "
                     "returning, so nothing keeps downloading or writing once you have reported")
    ending = _Ending(error, ended, report["deadline"], report["canceled"], tuple(leaks))
    _judge_run(scenario, _GO_EXPECT[scenario], ending, still_open, records, dest, ckpt, case, _GO_WORDS,
               success=lambda by_shard: _judge_go_success(scenario, report, ended, dest, ckpt, by_shard, case,
                                                          index_name),
               failure=lambda name, reason: _judge_failure_go(scenario, error, ended, dest, name, reason))


def _judge_go_success(scenario, report, ended, dest, ckpt, by_shard, case, index_name) -> None:
    if report["error"] is not None:
        never = [k for k, name in enumerate(ckpt.files, 1) if not by_shard.get(name)]
        if scenario == "stall" and report["deadline"]:
            raise CaseFailure(f"{ended}: shard 2 went silent half-way and Download waited for it until the "
                              f"{case['timeout']:g} s deadline; only a connect timeout: a net.Dialer timeout "
                              "(or ResponseHeaderTimeout) does not bound a body, so cancel the request when no byte "
                              f"has come for ReadTimeout ({case['read_timeout']:g} s here; reset a timer on every "
                              "Read), then retry")
        if report["deadline"] and never:
            raise CaseFailure(f"{ended}: {_names(ckpt, never)} never requested although every failure here is "
                              "retryable: the first attempts failed and their slots were never given back (a "
                              "semaphore not released on the error path); release with defer right after "
                              "acquiring, or use Concurrency workers reading a channel")
        raise CaseFailure(f"{ended}; every fault here is retryable and all shards should arrive")
    _judge_folder(dest, ckpt, index_name, _GO_WORDS.folder)
    if scenario == "slow":
        name = ckpt.files[1]
        if by_shard.get(name, 0) > 1:
            raise CaseFailure(f"{name}, sent at 32 KiB/s (about 2 s, never a silence near ReadTimeout="
                              f"{case['read_timeout']:g} s), was requested {by_shard[name]} times: the per-request "
                              "timeout taken for a deadline on the whole request (http.Client.Timeout, or a "
                              "context.WithTimeout per request); ReadTimeout bounds each wait for data, and only "
                              "ctx bounds the whole download")


def _judge_failure_go(scenario, error, ended, dest, name, reason) -> None:
    if error is None or (reason not in error and "deadline" in error):
        if error is not None:
            raise CaseFailure(f"{ended}: the {reason} of {name} did not end the download, which ran on to the "
                              "deadline: the first error swallowed; on a final failure cancel the other workers "
                              "and return it, naming the shard and the reason")
        if scenario == "corrupt" and os.path.isfile(os.path.join(dest, name)):
            raise CaseFailure(f"returned nil and kept {name}, whose sha256 differs from its X-Linked-Etag: checksum "
                              "not verified; hash the .part (crypto/sha256) and compare before renaming it")
        raise CaseFailure(f"returned nil although {name} failed ({reason}): the first error swallowed; return it, "
                          "naming the shard and the reason")


def _grade_go(source):
    """Grade 19b from a :class:`~ringlab.check.loader.SourceFile` (or a path): build, then run the cases.
    Returns a :class:`~ringlab.check.result.GradeResult`; never raises."""
    # not at the top: check.registry imports every grader while it is built, and these two import the registry
    from ..isolated import untouched_stub
    from ..loader import find_project_dir

    path = getattr(source, "path", source)
    if path is None:
        return GradeResult("19b", "Download", NOT_ATTEMPTED, "no file given")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return GradeResult("19b", "Download", WRONG, f"19b: cannot read {path} as Go source: {exc}")
    stub = untouched_stub("19b", path)
    if stub is not None:
        return GradeResult("19b", "Download", NOT_ATTEMPTED, not_attempted_message(stub))
    if go_command() is None:
        return GradeResult("19b", "Download", NOT_ATTEMPTED, GO_MISSING)
    with tempfile.TemporaryDirectory(prefix="ringlab-19b-") as scratch:
        program = os.path.join(scratch, "fetch")
        try:
            build_with(find_project_dir("go"), {GO_FILE_IN_MODULE: set_package(text, "exercise")}, GO_COMMAND,
                       program, vet="shards/exercise")
        except GoBuildError as exc:
            return GradeResult("19b", "Download", WRONG, f"{path}: {exc}")
        except OSError as exc:  # the module could not be copied or written: not the learner's doing
            return GradeResult("19b", "Download", NOT_ATTEMPTED, f"19b: could not prepare the Go build: {exc}")
        return run_grader("19b", "Download", program, check_go_download, go_cases(), None,
                          "every shard arrived complete and verified, within the limit, every failure was reported "
                          "and cleaned up, and no goroutine or connection outlived Download")


GO_EXERCISES = (
    Exercise("19b", "Download", "Download a sharded checkpoint in Go: limit, timeouts, retries, cancellation",
             _grade_go, (
                 "Concurrency workers reading shard names from a channel bound the requests in flight by "
                 "construction; one http.Transport (net.Dialer{Timeout: ConnectTimeout}, ResponseHeaderTimeout, "
                 "MaxConnsPerHost) for all of them, closed with CloseIdleConnections when Download returns.",
                 "net/http has no per-read timeout: wrap the body in a Reader that resets a time.AfterFunc on "
                 "every Read and cancels the request's context when it fires. On the first final error cancel a "
                 "context shared by the workers, and wg.Wait() before returning that first error.",
                 "Per shard: open NAME.part, Range: bytes=<its size>- when not empty; 200/206 -> io.Copy, then "
                 "sha256 against X-Linked-Etag and os.Rename; 429/5xx or a broken connection -> wait max(Retry-After, "
                 "backoff in [d/2, d]) in a select with ctx.Done(); any other status -> return "
                 "fmt.Errorf(\"shard %s: HTTP %d\", ...).",
             )),
)

EXERCISES = (*PYTHON_EXERCISES, *GO_EXERCISES)
