"""Graders for topic 01, ring all-reduce (card 01; 01c is the torch-free half of card 03).

* 01a ``ring_allreduce(arrays) -> (outputs, sent)``: results against the direct sum, bytes
  per rank and step against the documented rotation.
* 01b ``ring_chunk_to_send(rank, step, world_size, phase) -> chunk``: any rotation that
  makes a correct ring all-reduce passes; checked by replaying the schedule symbolically.
* 01c ``ring_reduce_scatter_rank(rank, world_size, data, exchange) -> (chunk, values)``: the
  learner's per-rank loop runs on one thread per rank with a simulated send/recv.
"""

from __future__ import annotations

import threading
import ml_dtypes
import numpy as np
from ringlab.collectives import Schedule, Transfer, chunk_sizes, replay
from ..engine import CaseFailure, run_grader
from ..exercise import Exercise
from ..result import TrafficRow

EDGE_WORLD_SIZES = (1, 2, 3, 4, 5, 7, 8, 13)


# 01a also runs these dtypes: int8 wraps around on overflow, floats round at every addition.
ALLREDUCE_DTYPES = ("int8", "float32", "float16", "bfloat16")


def _numels(n: int) -> list[int]:
    return sorted({0, 1, max(n - 1, 1), n, n + 1, 3 * n + 2})


def edge_cases() -> list[dict]:
    """world sizes incl. 1, odd and prime; numel 0, 1, N-1, N, N+1, 3N+2."""
    return [{"world_size": n, "numel": m, "seed": n * 100 + m} for n in EDGE_WORLD_SIZES for m in _numels(n)]


def allreduce_cases() -> list[dict]:
    """01a: the int64 edge cases, then each dtype of ``ALLREDUCE_DTYPES`` at a few world sizes."""
    typed = [{"world_size": n, "numel": m, "seed": n * 100 + m + 7, "dtype": dt}
             for dt in ALLREDUCE_DTYPES for n in (2, 3, 5, 8) for m in (n + 1, 4 * n + 3)]
    return [{**case, "dtype": "int64"} for case in edge_cases()] + typed


def case_strategy(max_world_size: int = 16, max_numel: int = 64):
    """Hypothesis strategy of ``{"world_size", "numel", "seed"}`` cases (imported lazily)."""
    from hypothesis import strategies as st

    return st.fixed_dictionaries({"world_size": st.integers(1, max_world_size),
                                  "numel": st.integers(0, max_numel), "seed": st.integers(0, 1000)})


def allreduce_strategy():
    """01a's hypothesis cases: :func:`case_strategy` plus a dtype."""
    from hypothesis import strategies as st

    return st.builds(lambda case, dtype: {**case, "dtype": dtype}, case_strategy(),
                     st.sampled_from(("int64",) + ALLREDUCE_DTYPES))


def _dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _inputs(world_size: int, numel: int, seed: int, dtype: str = "int64") -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    dt = _dtype(dtype)
    if dt.kind in "iu":
        lo, hi = (-20, 21) if dt == np.int64 else (np.iinfo(dt).min, np.iinfo(dt).max + 1)  # int8: sums wrap
        return [rng.integers(lo, hi, size=numel).astype(dt) for _ in range(world_size)]
    return [rng.standard_normal(numel).astype(dt) for _ in range(world_size)]


def _as_int(value, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise CaseFailure(f"{what} should be an int, got {value!r}")
    return int(value)


def _compare_outputs(outputs, expected: np.ndarray, world_size: int, bound: np.ndarray | None = None,
                     cause=None) -> None:
    """Every rank's array has ``expected``'s shape and dtype and equals it (within ``bound`` for floats).

    ``cause(outputs)`` may name the classic mistake behind a wrong value; it is added to the message.
    """
    if not isinstance(outputs, (list, tuple)) or len(outputs) != world_size:
        got = len(outputs) if isinstance(outputs, (list, tuple)) else type(outputs).__name__
        raise CaseFailure(f"outputs should be a list of {world_size} arrays (one per rank), got {got}")
    for r, out in enumerate(outputs):
        out = np.asarray(out)
        if out.shape != expected.shape:
            raise CaseFailure(f"rank {r} holds an array of shape {out.shape}, expected {expected.shape}")
        if bound is not None and out.dtype != expected.dtype:
            raise CaseFailure(f"rank {r} returned {out.dtype} for {expected.dtype} input; keep the input's dtype "
                              "(a ring sends and adds chunks in the gradient's own dtype)")
        if bound is None:
            wrong = np.flatnonzero(out != expected)
        else:
            err = np.abs(out.astype(np.float64) - expected.astype(np.float64))
            wrong = np.flatnonzero(~(err <= bound))
        if wrong.size:
            i = int(wrong[0])
            why = cause(outputs) if cause is not None else None
            raise CaseFailure(f"rank {r} holds {out[i]} at element {i}, expected {expected[i]}"
                              + (f" ({bound[i]:.3g} allowed for rounding)" if bound is not None else "")
                              + (f": {why}" if why else ""))


def expected_allreduce_bytes_per_step(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """(2(N-1), N) bytes per step and rank for the documented rotation, enumerated step by step."""
    c = chunk_sizes(numel, world_size)
    n = world_size
    rows = [[c[(r - s) % n] for r in range(n)] for s in range(n - 1)]
    rows += [[c[(r + 1 - s) % n] for r in range(n)] for s in range(n - 1)]
    return np.array(rows, dtype=np.int64).reshape(2 * (n - 1), n) * itemsize


def ring_variant(arrays: list[np.ndarray], forward_original: bool = False, gather_shift: int = 1) -> np.ndarray:
    """What ring all-reduce yields with one of the classic mistakes, rank by rank, as a ``(N, numel)`` array.

    ``forward_original``: the reduce-scatter forwards each rank's original chunk instead of its running sum.
    ``gather_shift``: the all-gather sends chunk ``(r + gather_shift - s) % N`` (1 is right; 0 starts one
    chunk early, before the chunk is finished).
    """
    n = len(arrays)
    original = [np.array_split(np.array(a), n) for a in arrays]
    work = [[c.copy() for c in parts] for parts in original]
    for s in range(n - 1):
        source = original if forward_original else work
        outgoing = [source[r][(r - s) % n].copy() for r in range(n)]
        for r in range(n):
            work[(r + 1) % n][(r - s) % n] = work[(r + 1) % n][(r - s) % n] + outgoing[r]
    for s in range(n - 1):
        outgoing = [work[r][(r + gather_shift - s) % n].copy() for r in range(n)]
        for r in range(n):
            work[(r + 1) % n][(r + gather_shift - s) % n] = outgoing[r]
    return np.stack([np.concatenate(w) if w else np.zeros(0, arrays[0].dtype) for w in work])


def _allreduce_cause(arrays):
    """A function naming which classic mistake reproduces the learner's outputs exactly, if one does."""
    def cause(outputs):
        got = np.stack([np.asarray(o) for o in outputs])
        for variant, words in (
                (dict(forward_original=True), "this is what forwarding each rank's original chunk in the "
                 "reduce-scatter gives; forward the running partial sum instead"),
                (dict(gather_shift=0), "this is what starting the all-gather one chunk early gives: at step s "
                 "rank r must send chunk (r + 1 - s) % N, the one it finished last")):
            want = ring_variant(arrays, **variant)
            if want.shape == got.shape and want.dtype == got.dtype and np.array_equal(want, got):
                return words
        return None
    return cause


def check_ring_allreduce(fn, world_size: int, numel: int, seed: int, dtype: str = "int64") -> None:
    """01a: every rank holds the sum, in the input's dtype, bit-identical across ranks; bytes per step
    match the rotation. Integers are exact (int8 wraps around); floats lie within the rounding bound
    ``(N - 1) u sum|x| + u |sum|`` of the float64 sum (Higham), u the dtype's unit roundoff."""
    arrays = _inputs(world_size, numel, seed, dtype)
    dt = arrays[0].dtype
    result = fn([a.copy() for a in arrays])
    if not isinstance(result, tuple) or len(result) != 2:
        raise CaseFailure("ring_allreduce should return a tuple (outputs, sent)")
    outputs, sent = result
    if dt.kind in "iu":
        expected, bound = np.sum(arrays, axis=0, dtype=dt), None  # modular, as NCCL
        if dtype != "int64":  # a dtype check for the narrow integers too
            bound = np.zeros(numel)
    else:
        exact = np.sum(np.array(arrays, dtype=np.float64), axis=0)
        u = float(ml_dtypes.finfo(dt).eps) / 2  # numpy's finfo refuses bfloat16
        bound = (world_size - 1) * u * np.abs(np.array(arrays, dtype=np.float64)).sum(axis=0) + u * np.abs(exact)
        expected = exact.astype(dt)
    _compare_outputs(outputs, expected, world_size, bound, _allreduce_cause(arrays))
    if dt.kind == "f" or dtype == "bfloat16":
        first = np.asarray(outputs[0])
        for r, out in enumerate(outputs[1:], start=1):
            if not np.array_equal(np.asarray(out).view(np.uint8), first.view(np.uint8)):
                raise CaseFailure(f"rank {r}'s {dtype} result differs from rank 0's in its last bits: a ring computes "
                                  "each element once, on one rank, and copies it, so every rank must end bit-identical "
                                  "(ranks that each add the inputs themselves drift apart)")
    want = expected_allreduce_bytes_per_step(world_size, numel, dt.itemsize)
    if not isinstance(sent, (list, tuple)) or len(sent) != len(want):
        got_len = len(sent) if isinstance(sent, (list, tuple)) else type(sent).__name__
        raise CaseFailure(f"sent should be a list of 2 * (world_size - 1) = {len(want)} steps, got {got_len}")
    try:
        got = np.array([[int(b) for b in step] for step in sent], dtype=np.int64).reshape(want.shape)
    except (TypeError, ValueError):
        raise CaseFailure(f"sent should hold, for each step, a list of {world_size} ints (bytes per rank)") from None
    bad = np.argwhere(got != want)
    if bad.size:
        s, r = (int(v) for v in bad[0])
        table = [TrafficRow(k, int(want[:, k].sum()), int(got[:, k].sum())) for k in range(world_size)]
        if np.array_equal(got.sum(axis=0), want.sum(axis=0)):
            phase, k = ("reduce-scatter", s) if s < world_size - 1 else ("all-gather", s - (world_size - 1))
            documented = "(r - s) % N" if phase == "reduce-scatter" else "(r + 1 - s) % N"
            raise CaseFailure(f"your rotation differs from the documented one: every rank's total is right, but at "
                              f"{phase} step {k} rank {r} sent {got[s, r]} bytes where chunk {documented} has "
                              f"{want[s, r]}; 01a checks the documented rotation (01b accepts any valid one)", table)
        raise CaseFailure(f"rank {r} sent {got[s, r]} bytes at step {s}, expected {want[s, r]}", table)


def check_ring_schedule(fn, world_size: int) -> None:
    """01b: the learner's rotation must make a correct ring all-reduce (any valid rotation passes)."""
    n = world_size
    steps = []
    for phase, reduce in (("reduce_scatter", True), ("all_gather", False)):
        for s in range(n - 1):
            step = []
            for r in range(n):
                chunk = _as_int(fn(r, s, n, phase), f"ring_chunk_to_send({r}, {s}, {n}, {phase!r})")
                if not 0 <= chunk < n:
                    raise CaseFailure(f"rank {r} at step {s} of {phase} sends chunk {chunk}, "
                                      f"but chunks are numbered 0..{n - 1}")
                step.append(Transfer(r, (r + 1) % n, chunk, reduce))
            steps.append(tuple(step))
    every = (tuple(range(n)),) * n
    states = list(replay(Schedule("all_reduce", "learner", n, n, tuple(steps), every, every)))
    for k, holds in enumerate(states[1:]):
        phase, s = ("reduce_scatter", k) if k < n - 1 else ("all_gather", k - (n - 1))
        twice = np.argwhere(holds > 1)
        if twice.size:
            r, c, src = (int(v) for v in twice[0])
            raise CaseFailure(f"after step {s} of {phase}, rank {r}'s chunk {c} counts rank {src}'s data "
                              f"{holds[r, c, src]} times")
    mid = states[n - 1]
    for c in range(n):
        if not any((mid[r, c] == 1).all() for r in range(n)):
            best = max(range(n), key=lambda r: mid[r, c].sum())
            have = [int(k) for k in np.flatnonzero(mid[best, c])]
            raise CaseFailure(f"after the reduce-scatter phase no rank holds chunk {c} with all {n} "
                              f"contributions (rank {best} has those of ranks {have})")
    final = states[-1]
    for r in range(n):
        for c in range(n):
            missing = [int(k) for k in np.flatnonzero(final[r, c] == 0)]
            if missing:
                raise CaseFailure(f"after the all-gather phase rank {r}'s chunk {c} lacks the data of ranks {missing}")


def schedule_cases() -> list[dict]:
    return [{"world_size": n} for n in list(range(1, 17)) + [31, 64]]


class _Ring:
    """In-process point-to-point for one step at a time: send to rank+1, receive from rank-1.

    Every rank must call ``exchange`` equally often. A rank that calls it more often than a rank that has
    already returned would wait forever, so that is detected at once (the barrier is aborted) instead of
    by a timeout that a busy machine could also reach: the verdict does not depend on speed."""

    def __init__(self, world_size: int, timeout: float):
        self.n = world_size
        self.barrier = threading.Barrier(world_size, timeout=timeout)
        self.slots: list = [None] * world_size
        self.calls = [0] * world_size
        self.finished: dict[int, int] = {}  # rank -> exchange calls it made before returning
        self.lock = threading.Lock()
        self.sent: list[list[int]] = [[] for _ in range(world_size)]

    def finish(self, rank: int) -> None:
        """``rank`` returned: any rank already past its call count can never be matched."""
        with self.lock:
            self.finished[rank] = self.calls[rank]
            if max(self.calls) > self.calls[rank]:
                self.barrier.abort()

    def exchange_for(self, rank: int):
        def exchange(chunk):
            arr = np.asarray(chunk)
            with self.lock:
                self.calls[rank] += 1
                if any(count < self.calls[rank] for count in self.finished.values()):
                    self.barrier.abort()  # a rank that returned will never make this call
            self.sent[rank].append(int(arr.nbytes))
            self.slots[rank] = arr.copy()
            self.barrier.wait()  # everyone has posted its send
            received = self.slots[(rank - 1) % self.n]
            self.barrier.wait()  # everyone has read before the next step overwrites
            return received.copy()

        return exchange


def run_per_rank(fn, world_size: int, arrays: list[np.ndarray], timeout: float = 60.0):
    """Run ``fn(rank, world_size, data, exchange)`` on one thread per rank.

    Returns ``(results, ring)``; raises CaseFailure naming the rank that raised, or the ranks
    whose calls to ``exchange`` did not match (which would hang real processes).
    """
    ring = _Ring(world_size, timeout)
    results: list = [None] * world_size
    errors: dict[int, BaseException] = {}

    def body(rank: int) -> None:
        try:
            results[rank] = fn(rank, world_size, arrays[rank].copy(), ring.exchange_for(rank))
            ring.finish(rank)
        except threading.BrokenBarrierError:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported to the learner
            errors[rank] = exc
            ring.barrier.abort()

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout * (world_size + 2))
    if any(t.is_alive() for t in threads):
        ring.barrier.abort()
    if errors:
        rank = min(errors)
        if isinstance(errors[rank], NotImplementedError):
            raise errors[rank]
        raise CaseFailure(f"rank {rank} raised {type(errors[rank]).__name__}: {errors[rank]}")
    if len(set(ring.calls)) > 1:
        detail = ", ".join(f"rank {r}: {k}" for r, k in enumerate(ring.calls))
        raise CaseFailure(f"ranks called exchange different numbers of times ({detail}); real processes would hang")
    return results, ring


def check_reduce_scatter_rank(fn, world_size: int, numel: int, seed: int) -> None:
    """01c: each rank returns (chunk index, fully reduced values); indices form a permutation."""
    arrays = _inputs(world_size, numel, seed)
    total = np.sum(arrays, axis=0)
    parts = np.array_split(total, world_size)
    sizes = chunk_sizes(numel, world_size)
    results, ring = run_per_rank(fn, world_size, arrays)
    if ring.calls[0] != world_size - 1:
        raise CaseFailure(f"each rank should call exchange world_size - 1 = {world_size - 1} times, "
                          f"rank 0 called it {ring.calls[0]} times")
    owned = []
    for r, res in enumerate(results):
        if not isinstance(res, tuple) or len(res) != 2:
            raise CaseFailure(f"rank {r} should return (chunk_index, values), got {type(res).__name__}")
        c = _as_int(res[0], f"rank {r}'s chunk index")
        if not 0 <= c < world_size:
            raise CaseFailure(f"rank {r} returned chunk index {c}; chunks are numbered 0..{world_size - 1}")
        values = np.asarray(res[1])
        if values.shape != parts[c].shape:
            raise CaseFailure(f"rank {r} returned chunk {c} with shape {values.shape}, expected {parts[c].shape}")
        wrong = np.flatnonzero(values != parts[c])
        if wrong.size:
            i = int(wrong[0])
            two = np.array_split(arrays[r], world_size)[c] + np.array_split(arrays[(r - 1) % world_size], world_size)[c]
            why = (": it holds only its own and rank r - 1's contributions, which is what sending the original chunk "
                   "every step gives (the widely copied version); send your running partial sum instead"
                   if world_size > 2 and np.array_equal(values, two) else "")
            raise CaseFailure(f"rank {r} holds {values[i]} at element {i} of chunk {c}, expected {parts[c][i]}{why}")
        owned.append(c)
    if sorted(owned) != list(range(world_size)):
        raise CaseFailure(f"ranks returned chunks {owned}; every chunk must end on exactly one rank")
    table = [TrafficRow(r, int(8 * (numel - sizes[owned[r]])), int(sum(ring.sent[r]))) for r in range(world_size)]
    for row in table:
        if not row.ok:
            raise CaseFailure(f"rank {row.rank} sent {row.reported} bytes in total, expected {row.expected} "
                              "(every chunk but the one it ends with, once)", table)


def _ring_allreduce(fn):
    return run_grader("01a", "ring_allreduce", fn, check_ring_allreduce, allreduce_cases(), allreduce_strategy(),
                      "every rank holds the sum in its own dtype, bit-identical across ranks, and every step's "
                      "bytes match the rotation")


def _ring_schedule(fn):
    return run_grader("01b", "ring_chunk_to_send", fn, check_ring_schedule, schedule_cases(),
                      passed_message="your rotation gives a correct ring all-reduce at every world size tried")


def _reduce_scatter_rank(fn):
    return run_grader("01c", "ring_reduce_scatter_rank", fn, check_reduce_scatter_rank, edge_cases(),
                      case_strategy(max_world_size=8, max_numel=40),
                      "every rank ends with one fully reduced chunk and sent every other chunk once")


EXERCISES = (
    Exercise("01a", "ring_allreduce", "Ring all-reduce with byte counts",
                 _ring_allreduce, (
                     "Split with np.array_split(a, N): chunk sizes differ by one when N does not divide numel, "
                     "and numel // N drops the remainder.",
                     "In the reduce-scatter phase a rank forwards its running partial sum, not its original "
                     "chunk: the receiver adds what arrived to its own copy and sends that sum on the next step.",
                     "Keep a per-step list of bytes: at each step rank r sends exactly one chunk, "
                     "chunk (r - s) % N in reduce-scatter and (r + 1 - s) % N in all-gather; count its nbytes.",
                 )),
    Exercise("01b", "ring_chunk_to_send", "The ring rotation", _ring_schedule, (
            "Every rank sends one chunk per step and the chunk index must change with the step; "
            "otherwise the same chunk travels and the others never move.",
            "Follow one chunk: if rank r sends chunk c at step s, rank r + 1 should send the same chunk c "
            "(now with two contributions) at step s + 1.",
            "After N - 1 reduce-scatter steps rank r holds the finished chunk it received last; in the "
            "all-gather phase it must send that chunk first.",
        )),
    Exercise("01c", "ring_reduce_scatter_rank",
                 "Ring reduce-scatter as a per-rank loop (no torch)", _reduce_scatter_rank, (
                     "Each rank calls exchange exactly world_size - 1 times; exchange sends to rank + 1 and "
                     "returns what rank - 1 sent in the same step.",
                     "The widely copied version sends the original chunk every step and only adds when the "
                     "received index equals its rank: for N > 2 most contributions never reach their owner.",
                     "Send chunk (rank - step) % N from your working copy, add what you receive into chunk "
                     "(rank - step - 1) % N of your working copy; you end owning chunk (rank + 1) % N.",
                 )),
)
