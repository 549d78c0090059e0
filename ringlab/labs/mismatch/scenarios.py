"""The reproducer: each scenario run on real gloo processes in each mode, and what every rank saw.

Scenarios (:data:`SCENARIOS`) and modes (:data:`MODES`) are described in :func:`run_scenarios`
and in :mod:`ringlab.labs.mismatch`. Needs torch.
"""

from __future__ import annotations

import datetime
import os
import re
import tempfile
import time
from dataclasses import dataclass
from typing import Sequence

from ringlab.dist import launch
from ringlab.optional import require_torch

from .fingerprint import CollectiveMismatchError
from .guard import CollectiveGuard, CollectiveTimeoutError

SCENARIOS = ("broadcast_vs_all_reduce", "int64_broadcast_vs_float32_all_reduce", "skip_barrier")
MODES = ("plain", "detail", "guard")


@dataclass(frozen=True)
class RankOutcome:
    """What one rank saw in one scenario.

    Attributes:
        rank: the rank.
        status: ``"completed"`` (the calls returned), ``"hung"`` (blocked until the group's timeout;
            gloo then raised a timeout, or a closed connection once a peer had timed out) or
            ``"error"`` (raised before the timeout).
        summary: a short, run-independent description (no ports, paths, timings).
        error: the exception text as raised ("" when completed); may contain ports and paths.
        values: the tensor after the calls when completed, as a list, else None.
        correct: whether ``values`` equal what a matched collective would give (None if not completed).
        seconds: wall time from the first call to the outcome.
        log: what the rank's process wrote to stderr meanwhile (torch's C++ log lines with DETAIL).
    """

    rank: int
    status: str
    summary: str
    error: str = ""
    values: list | None = None
    correct: bool | None = None
    seconds: float = 0.0
    log: str = ""


def _scenario_calls(scenario: str, rank: int, world_size: int, odd: int, run):
    """Run the scenario's calls through ``run(op, tensor, **kw)``; return (tensor, expected values)."""
    torch, _ = require_torch(__name__)
    total = float(world_size * (world_size + 1) // 2)  # sum over ranks of rank + 1
    if scenario == "skip_barrier":
        tensor = torch.full((4,), float(rank + 1))
        if rank != odd:
            run("BARRIER", None)
        run("ALLREDUCE", tensor)
        return tensor, [total] * 4
    if scenario == "broadcast_vs_all_reduce":
        tensor = torch.full((4,), float(rank + 1))
        odd_expected = [1.0] * 4  # what broadcast from rank 0 would give
    else:
        tensor = torch.tensor([7], dtype=torch.int64) if rank == odd else torch.full((25,), float(rank + 1))
        odd_expected = [0]  # unknowable: rank 0 holds no int64 [1] tensor
    if rank == odd:
        run("BROADCAST", tensor, src=0)
        return tensor, odd_expected
    run("ALLREDUCE", tensor)
    return tensor, [total] * tensor.numel()


_DETAIL_FP = re.compile(r"Rank (\d+) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d+),? ?"
                        r"OpType=(\w+)(?:, TensorShape=\[([^\]]*)\], TensorDtypes=(\w+))?")


def _summarise(status: str, error: str, timeout: float) -> str:
    """Run-independent words for an outcome (nbval compares notebook text across runs)."""
    if status == "hung":
        return f"hung until the {timeout:g} s timeout, then gloo raised"
    found = _DETAIL_FP.findall(error)
    if "Detected mismatch" in error and found:
        sides = [f"rank {r} {op}" + (f" shape [{shape}] {dtype}" if dtype else "") for r, _, op, shape, dtype in found]
        return "torch DETAIL: Detected mismatch between collectives: " + " vs ".join(sides)
    barrier = re.search(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier", error)
    if barrier:
        return f"torch DETAIL: rank(s) {barrier.group(1)} failed to pass monitoredBarrier"
    if "successfully reached monitoredBarrier" in error:
        return "torch DETAIL: reached monitoredBarrier, then lost rank 0 (rank 0's log names the faulty rank)"
    return error.strip().splitlines()[0] if error.strip() else "error"


_HANG_WORDS = ("Timed out", "Connection closed by peer", "Connection reset by peer")


def _run_one(scenario: str, mode: str, odd: int, timeout: float, log_fd: int) -> RankOutcome:
    torch, dist = require_torch(__name__)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    previous = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    if mode == "detail":  # the wrapper is chosen when a group is created: set the level first
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        dist.set_debug_level_from_env()
    try:
        group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout))
    finally:
        if mode == "detail":
            os.environ.pop("TORCH_DISTRIBUTED_DEBUG") if previous is None else os.environ.update(
                TORCH_DISTRIBUTED_DEBUG=previous)
            dist.set_debug_level_from_env()
    guard = CollectiveGuard(group, timeout) if mode == "guard" else None
    methods = {"ALLREDUCE": "all_reduce", "BROADCAST": "broadcast", "BARRIER": "barrier"}

    def run(op, tensor, **kw):
        args = () if tensor is None else (tensor,)
        if guard is not None:
            return getattr(guard, methods[op])(*args, **kw)
        return getattr(dist, methods[op])(*args, group=group, **kw)

    log_start = os.lseek(log_fd, 0, os.SEEK_END)
    start = time.monotonic()
    try:
        tensor, expected = _scenario_calls(scenario, rank, world_size, odd, run)
        values = tensor.tolist()
        status, error, correct = "completed", "", values == expected
    except (CollectiveMismatchError, CollectiveTimeoutError) as exc:
        error, values, correct, status = f"{type(exc).__name__}: {exc}", None, None, "error"
        summary = f"guard: {type(exc).__name__}: " + (str(exc).splitlines()[0] if isinstance(
            exc, CollectiveMismatchError) else f"collective #{guard.seq} not reached by every rank in {timeout:g} s")
    except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
        error, values, correct = f"{type(exc).__name__}: {exc}", None, None
        hang = time.monotonic() - start >= 0.5 * timeout and any(w in error for w in _HANG_WORDS)
        status = "hung" if hang else "error"
        summary = _summarise(status, error, timeout)
    seconds = time.monotonic() - start
    os.lseek(log_fd, log_start, os.SEEK_SET)
    log = os.read(log_fd, 1 << 20).decode(errors="replace")
    if status == "completed":
        summary = "completed, values " + ("as a matched collective gives" if correct else f"WRONG: {values}")
    return RankOutcome(rank, status, summary, error, values, correct, round(seconds, 3), log)


def _rank_main(cases: list[tuple[str, str]], odd_rank: int | None, timeout: float) -> list[RankOutcome]:
    """Body of each rank: run the cases in order, each on a fresh group, stderr captured to a file."""
    # The C++ layers log to file descriptor 2; in a Jupyter kernel that stream is forwarded into
    # the cell's output with timestamps. Capture it instead: it is part of what we report.
    log = tempfile.TemporaryFile()
    os.dup2(log.fileno(), 2)
    world_size = require_torch(__name__)[1].get_world_size()
    return [_run_one(scenario, mode, default_odd_rank(scenario, world_size) if odd_rank is None else odd_rank,
                     timeout, log.fileno()) for scenario, mode in cases]


def default_odd_rank(scenario: str, world_size: int) -> int:
    """The rank that misbehaves by default: the last rank skips the barrier; rank 2 (or the last) broadcasts."""
    return world_size - 1 if scenario == "skip_barrier" else min(2, world_size - 1)


def run_scenarios(cases: Sequence[tuple[str, str]], world_size: int = 4, timeout: float = 2.0,
                  odd_rank: int | None = None) -> dict[tuple[str, str], list[RankOutcome]]:
    """Run several ``(scenario, mode)`` cases in one launch of ``world_size`` gloo processes.

    Scenarios (:data:`SCENARIOS`); the odd rank is ``odd_rank`` (default :func:`default_odd_rank`:
    rank 2 for the broadcasts, the last rank for the barrier, as in card 10):

    * ``broadcast_vs_all_reduce``: the odd rank calls ``broadcast(t, src=0)``, the others
      ``all_reduce(t)``, on the same float32 tensor of shape [4] (rank r holds r + 1).
    * ``int64_broadcast_vs_float32_all_reduce``: the odd rank broadcasts an int64 [1] tensor,
      the others all-reduce a float32 [25] tensor.
    * ``skip_barrier``: the odd rank skips a barrier the others call; then all call all_reduce.

    Modes (:data:`MODES`): ``plain``; ``detail`` (the case's group is created with
    ``TORCH_DISTRIBUTED_DEBUG=DETAIL``); ``guard`` (calls go through :class:`CollectiveGuard`).
    Each case runs on a fresh gloo group whose timeout is ``timeout`` seconds, so a hang costs
    about ``timeout`` seconds; process start-up adds a few seconds per rank (on 2 shared cores, 4 ranks
    took 10-25 s here).

    Returns ``{(scenario, mode): [RankOutcome of rank 0, 1, ...]}``. Raises ValueError for an
    unknown scenario or mode, ``world_size < 2`` or a bad ``odd_rank``; errors of
    :func:`ringlab.dist.launch` (a rank process dying, the overall deadline) propagate.
    """
    for scenario, mode in cases:
        if scenario not in SCENARIOS:
            raise ValueError(f"scenario={scenario!r}; accepted: {', '.join(SCENARIOS)}")
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}; accepted: {', '.join(MODES)}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 2:
        raise ValueError(f"world_size must be an int >= 2, got {world_size!r}")
    if odd_rank is not None and not 0 < odd_rank < world_size:
        raise ValueError(f"odd_rank must be in 1..{world_size - 1} (rank 0 is the broadcast source), got {odd_rank!r}")
    cases = list(cases)
    budget = 60.0 + len(cases) * 3 * timeout  # start-up on a loaded 2-core machine, then each case's timeout
    per_rank = launch(_rank_main, world_size, timeout=budget, args=(cases, odd_rank, timeout), threads=1)
    return {case: [outcomes[i] for outcomes in per_rank] for i, case in enumerate(cases)}


def reproduce(scenario: str = "broadcast_vs_all_reduce", mode: str = "plain", world_size: int = 4,
              timeout: float = 2.0) -> list[RankOutcome]:
    """One case of :func:`run_scenarios`: ``[RankOutcome of rank 0, 1, ...]``."""
    return run_scenarios([(scenario, mode)], world_size, timeout)[(scenario, mode)]


def outcome_table(outcomes: Sequence[RankOutcome]) -> str:
    """Text table, one line per rank: status and run-independent summary (safe for notebook output)."""
    return "\n".join(f"rank {o.rank}: {o.status:<9} {o.summary}" for o in outcomes)
