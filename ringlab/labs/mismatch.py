"""Mismatched collectives (P6): reproduce them on real processes, read torch's report, guard against them.

A collective is only correct when every rank of the group calls the same operation on
tensors of the same shape and dtype, in the same order. When one rank calls ``broadcast``
while the others call ``all_reduce``, nothing in the call itself notices: each rank posts the
sends and receives of *its* algorithm and waits for messages its peers never send.

Measured here (torch 2.13 CPU, gloo, 4 processes; :func:`run_scenarios` measures it again on
your machine rather than trusting this text):

* plain: every rank blocks until the group's timeout, then gloo raises ``Timed out waiting
  ... for recv/send operation`` (or, on the ranks whose peer timed out first, ``Connection
  closed by peer``). No values come back, right or wrong. Rank 3 skipping a barrier that the
  others call, then joining the next ``all_reduce``: the same hang.
* ``TORCH_DISTRIBUTED_DEBUG=DETAIL``: torch wraps the group in a checker that runs a monitored
  barrier and compares a ``CollectiveFingerPrint`` (SequenceNumber, OpType, TensorShape,
  TensorDtypes, TensorDeviceTypes) before each collective, so every rank fails at once with
  ``Detected mismatch between collectives on ranks``; each rank names itself and one
  other rank, not the whole picture.
* :class:`CollectiveGuard`: the same idea done in Python on a separate gloo group: every rank
  raises :class:`CollectiveMismatchError` naming every differing rank and field.

Fingerprint fields follow torch's ``CollectiveFingerPrint`` (``torch/csrc/distributed/c10d/
ProcessGroupWrapper.cpp``) and op names its ``OpType`` enum (``ALLREDUCE``, ``BROADCAST``, ...).
Importing this module does not import torch; the functions that need it do
(``pip install 'ringlab[torch]'``).
"""

from __future__ import annotations

import datetime
import os
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

FIELDS = ("seq", "op", "shape", "dtype", "device")
OPS = ("ALLREDUCE", "BROADCAST", "BARRIER", "ALLGATHER", "REDUCE")
SCENARIOS = ("broadcast_vs_all_reduce", "int64_broadcast_vs_float32_all_reduce", "skip_barrier")
MODES = ("plain", "detail", "guard")


def _torch():
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError("ringlab.labs.mismatch needs torch: pip install 'ringlab[torch]'") from exc
    return torch, dist


# --------------------------------------------------------------------------- fingerprints


@dataclass(frozen=True)
class Fingerprint:
    """What one rank is about to run: collective number ``seq``, ``op``, and its tensor's metadata.

    ``shape`` is a tuple of ints, ``dtype`` a torch dtype name without ``torch.`` (``"float32"``),
    ``device`` the device *type* (``"cpu"``, ``"cuda"``); all three are None for ``BARRIER``. Only the
    type: rank r normally drives ``cuda:r``, so ``cuda:0`` on rank 0 and ``cuda:1`` on rank 1 agree, while a
    CPU tensor where the others pass CUDA ones is a mismatch (torch's own check also compares types).
    """

    seq: int
    op: str
    shape: tuple | None = None
    dtype: str | None = None
    device: str | None = None

    @classmethod
    def of(cls, seq: int, op: str, tensor=None) -> Fingerprint:
        """Fingerprint of ``op`` on ``tensor`` (None for barrier). Raises ValueError for an unknown op."""
        if op not in OPS:
            raise ValueError(f"op={op!r}; accepted: {', '.join(OPS)}")
        if tensor is None:
            return cls(seq, op)
        device = getattr(tensor.device, "type", None) or str(tensor.device).split(":")[0]
        return cls(seq, op, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."), device)

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in FIELDS}


def _field(fp, name):
    return fp[name] if isinstance(fp, Mapping) else getattr(fp, name)


def compare_fingerprints(fingerprints: Sequence[Fingerprint | Mapping]) -> dict[int, tuple[str, ...]]:
    """Which ranks differ from the others, and in which fields.

    Args:
        fingerprints: one per rank, in rank order: :class:`Fingerprint` objects or mappings with
            the keys of :data:`FIELDS`.

    Returns:
        ``{rank: (field, ...)}`` for every rank holding, in some field, a value other than that
        field's reference value; fields in :data:`FIELDS` order; ``{}`` when all agree. The
        reference value of a field is the one most ranks hold; on a tie, the tied value that
        appears at the lowest rank (so with two ranks, rank 0 is the reference: which of two
        disagreeing ranks is "wrong" cannot be known, and the error message lists both values).
    """
    differing: dict[int, list[str]] = {}
    for name in FIELDS:
        values = [_field(fp, name) for fp in fingerprints]
        reference = Counter(values).most_common(1)[0][0] if values else None  # ties: first seen
        for rank, value in enumerate(values):
            if value != reference:
                differing.setdefault(rank, []).append(name)
    return {rank: tuple(names) for rank, names in sorted(differing.items())}


def _show(name: str, value) -> str:
    if value is None:
        return "-"
    if name == "shape":
        return "[" + ", ".join(str(d) for d in value) + "]"
    return str(value)


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(str(r) for r in ranks)


def describe_mismatch(fingerprints: Sequence[Fingerprint | Mapping]) -> str:
    """One paragraph naming the differing ranks and, for each differing field, which ranks hold which value."""
    diffs = compare_fingerprints(fingerprints)
    if not diffs:
        return f"all {len(fingerprints)} ranks agree"
    names = [name for name in FIELDS if any(name in fields for fields in diffs.values())]
    lines = ["collective mismatch: " + "; ".join(f"rank {r} differs in {', '.join(f)}" for r, f in diffs.items())]
    for name in names:
        holders: dict[str, list[int]] = {}
        for rank, fp in enumerate(fingerprints):
            holders.setdefault(_show(name, _field(fp, name)), []).append(rank)
        lines.append(f"  {name}: " + " vs ".join(f"{value} on {_ranks(ranks)}" for value, ranks in holders.items()))
    if "op" in names:
        lines.append(_skip_hint(fingerprints, diffs))
    return "\n".join(lines)


def _skip_hint(fingerprints, diffs: dict) -> str:
    """Where ops differ, say which collective each rank is at and suggest the usual cause: a skipped call."""
    at: dict[tuple, list[int]] = {}
    for rank, fp in enumerate(fingerprints):
        at.setdefault((_field(fp, "seq"), _field(fp, "op")), []).append(rank)
    odd = [key for key, ranks in at.items() if all("op" in diffs.get(r, ()) for r in ranks)]
    usual = [key for key in at if key not in odd]
    where = " while ".join(f"{_ranks(at[key])} {'is' if len(at[key]) == 1 else 'are'} at collective #{key[0]} "
                           f"({key[1]})" for key in odd + usual)
    first, expected = odd[0], (usual[0] if usual else odd[-1])
    return (f"  {where}: {_ranks(at[first])} probably skipped a {expected[1]} (or the others run one it does not); "
            f"check the code path that leads {_ranks(at[first])} to collective #{first[0]}")


class CollectiveMismatchError(RuntimeError):
    """Ranks were about to run different collectives. ``fingerprints`` (per rank) and ``differences``
    (``{rank: fields}``, see :func:`compare_fingerprints`) say how; ``str()`` says it in words."""

    def __init__(self, fingerprints: Sequence[Fingerprint]):
        self.fingerprints = list(fingerprints)
        self.differences = compare_fingerprints(self.fingerprints)
        super().__init__(describe_mismatch(self.fingerprints))


class CollectiveTimeoutError(TimeoutError):
    """Not every rank reached the guard's fingerprint exchange within its timeout (one skipped all
    remaining guarded collectives, hangs in other work, or died); nothing was run."""


# --------------------------------------------------------------------------- the guard


class CollectiveGuard:
    """Wrap the collectives of ``group`` so that ranks check they agree before each one runs.

    Before each call the guard all-gathers a :class:`Fingerprint` (its own call counter ``seq``,
    op, shape, dtype, device) over a separate gloo group created with ``timeout`` (seconds), so it
    works whatever the backend of ``group`` (gloo or nccl) and costs one small CPU exchange per
    collective. If the fingerprints differ, every rank raises the same
    :class:`CollectiveMismatchError` and none runs the collective; if the exchange itself does
    not complete in time, that rank raises :class:`CollectiveTimeoutError` instead of hanging.

    Creating a guard calls ``torch.distributed.new_group``, which every rank of the default group
    must call, in the same order. Use it as a context manager (``with CollectiveGuard() as g:``)
    or call :meth:`close`. Methods mirror ``torch.distributed``: :meth:`all_reduce`,
    :meth:`broadcast`, :meth:`barrier`, :meth:`all_gather`, :meth:`reduce`; :meth:`check` guards a
    call of your own. Raises ValueError for a non-positive timeout.
    """

    def __init__(self, group=None, timeout: float = 30.0):
        _, dist = _torch()
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.group, self.timeout, self.seq = group, float(timeout), 0
        ranks = None if group is None else dist.get_process_group_ranks(group)
        self._exchange = dist.new_group(ranks=ranks, backend="gloo", timeout=datetime.timedelta(seconds=timeout))

    def check(self, op: str, tensor=None) -> Fingerprint:
        """Exchange fingerprints for the next collective; return this rank's when all ranks agree."""
        _, dist = _torch()
        mine = Fingerprint.of(self.seq, op, tensor)
        gathered: list = [None] * dist.get_world_size(self._exchange)
        try:
            dist.all_gather_object(gathered, mine.as_dict(), group=self._exchange)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CollectiveTimeoutError(
                f"collective #{mine.seq} ({op}): not every rank reached the guard within {self.timeout:g} s; "
                f"a rank skipped it and every later guarded call, is stuck elsewhere, or died ({first})") from exc
        fingerprints = [Fingerprint(**{**fp, "shape": None if fp["shape"] is None else tuple(fp["shape"])})
                        for fp in gathered]
        self.seq += 1
        if compare_fingerprints(fingerprints):
            raise CollectiveMismatchError(fingerprints)
        return mine

    def all_reduce(self, tensor, op=None):
        _, dist = _torch()
        self.check("ALLREDUCE", tensor)
        return dist.all_reduce(tensor, op=op or dist.ReduceOp.SUM, group=self.group)

    def broadcast(self, tensor, src: int):
        _, dist = _torch()
        self.check("BROADCAST", tensor)
        return dist.broadcast(tensor, src=src, group=self.group)

    def barrier(self):
        _, dist = _torch()
        self.check("BARRIER")
        return dist.barrier(group=self.group)

    def all_gather(self, tensor_list, tensor):
        _, dist = _torch()
        self.check("ALLGATHER", tensor)
        return dist.all_gather(tensor_list, tensor, group=self.group)

    def reduce(self, tensor, dst: int, op=None):
        _, dist = _torch()
        self.check("REDUCE", tensor)
        return dist.reduce(tensor, dst=dst, op=op or dist.ReduceOp.SUM, group=self.group)

    def close(self) -> None:
        """Destroy the exchange group (collective too: every rank should close its guard)."""
        _, dist = _torch()
        if self._exchange is not None:
            dist.destroy_process_group(self._exchange)
            self._exchange = None

    def __enter__(self) -> CollectiveGuard:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:  # after a failure the peers may be gone: a collective teardown could hang
            self.close()


# --------------------------------------------------------------------------- the reproducer


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
    torch, _ = _torch()
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
    torch, dist = _torch()
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
    world_size = _torch()[1].get_world_size()
    return [_run_one(scenario, mode, default_odd_rank(scenario, world_size) if odd_rank is None else odd_rank,
                     timeout, log.fileno()) for scenario, mode in cases]


def default_odd_rank(scenario: str, world_size: int) -> int:
    """The rank that misbehaves by default: the last rank skips the barrier; rank 2 (or the last) broadcasts."""
    return world_size - 1 if scenario == "skip_barrier" else min(2, world_size - 1)


def run_scenarios(cases: Sequence[tuple[str, str]], world_size: int = 4, timeout: float = 2.0,
                  odd_rank: int | None = None) -> dict[tuple[str, str], list[RankOutcome]]:
    """Run several ``(scenario, mode)`` cases in one launch of ``world_size`` gloo processes.

    Scenarios (:data:`SCENARIOS`); the odd rank is ``odd_rank`` (default :func:`default_odd_rank`:
    rank 2 for the broadcasts, the last rank for the barrier, as in P6):

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
    from ringlab.dist import launch

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
