"""Compile a :class:`~ringlab.collectives.Schedule` for one message size into a :class:`Plan` the executor runs.

Where values live. A (rank, chunk) slot's current value is in the input until a step writes it,
then in the output array (``out`` doubles as the working buffer, so the input is never copied up
front). A ring phase (:class:`~ringlab.collectives.RingPhase`) is the exception that makes rings
fast: chunk k travels a chain of ranks, so its running value lives in one *carry* row shaped like a
rank's message, which stays in cache, and it is written to ``out`` only where that slot's value is
needed later (an output, or read by a later phase). A ring all-reduce therefore reads its input
once and writes each output chunk once, like the direct reduction.

Liveness, the one analysis that needs it, runs backwards over (rank, non-empty chunk) tables of
booleans: never more cells than the message has elements. Everything is decided with numpy on
whole steps (or blocks of ring steps); no Python runs per transfer, except that steps moving
chunks of at least ``DIRECT_CHUNK`` elements apply their transfers one slice each, in place, which
avoids gather copies where the data dwarfs the loop.

Chunks with no elements (numel < num_chunks) move nothing and are left out of the plan; the
executor still counts their transfers at 0 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ringlab.collectives import RingPhase, Schedule, chunk_sizes

DIRECT_CHUNK = 1 << 15  # elements: at or above this, a step applies its transfers as one slice op each
_BLOCK_CELLS = 1 << 22  # ring liveness is processed this many (step, chunk) cells at a time


@dataclass(frozen=True)
class SizeClass:
    """Consecutive chunks of one size (``numpy.array_split`` makes at most two): chunks ``first .. first + count - 1``."""

    first: int
    count: int
    size: int
    start: int  # element offset of chunk ``first`` in a rank's message


@dataclass(frozen=True)
class Segment:
    """Chunks ``k0 .. k0 + length - 1`` of one size class at one ring step; receiver of chunk k0 is rank ``r0``.

    Receivers are consecutive ranks (``r0 + i`` gets chunk ``k0 + i``), so every operand is one strided
    view. ``from_out``: the receiver's own copy is in ``out`` (else in the input). ``store``: write the
    result to ``out`` (its value is needed later).
    """

    cls: int
    k0: int  # chunk index within the size class
    length: int
    r0: int
    from_out: bool
    store: bool


@dataclass(frozen=True)
class RingPlan:
    """A compiled ring phase: the carry's initial segments and, per step, its segments."""

    phase: RingPhase
    first_step: int
    init: tuple[Segment, ...]
    steps: tuple[tuple[Segment, ...], ...]


class Round(NamedTuple):
    """The transfers of a :class:`Group` applied in one round (the i-th transfer into a slot applies in round i).

    ``rows``: the group's rows applied; per row the receiver ``dst`` (rank), its ``chunk`` within the size
    class, whether it ``reduce``s, and whether the receiver's own copy (for reduces) is in ``out``
    (``own_from_out``). All int64 or bool arrays of one length.
    """

    rows: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    reduce: np.ndarray
    own_from_out: np.ndarray


@dataclass(frozen=True)
class Group:
    """The transfers of one explicit step in one size class, as index arrays (``k`` rows).

    ``src_*``: sender rank, chunk within the class and whether its value is in ``out``; ``rounds``: the
    :class:`Round` records in the order they apply.
    """

    cls: int
    src_rank: np.ndarray
    src_chunk: np.ndarray
    src_from_out: np.ndarray
    rounds: tuple[Round, ...]


class Slice(NamedTuple):
    """One block transfer applied in place: elements ``lo:hi`` of rank ``src``'s row into rank ``dst``'s row.

    ``src_from_out``/``own_from_out`` say where the sent value and the receiver's copy live; ``snap`` is the
    offset of the sent value in the step's snapshot buffer when another transfer of the step overwrites it
    first, else -1.
    """

    src: int
    dst: int
    lo: int
    hi: int
    reduce: bool
    src_from_out: bool
    own_from_out: bool
    snap: int


class Snapshot(NamedTuple):
    """Elements ``lo:hi`` of rank ``rank``'s row (of ``out`` if ``from_out``, else of the input), copied to
    ``offset`` of the step's snapshot buffer before the step's slices apply."""

    rank: int
    lo: int
    hi: int
    from_out: bool
    offset: int


class Final(NamedTuple):
    """Output slots of size class ``cls`` that no step writes: ``ranks`` and ``chunks`` (within the class,
    int64 arrays) copied from the input at the end."""

    cls: int
    ranks: np.ndarray
    chunks: np.ndarray


@dataclass(frozen=True)
class ExplicitStep:
    """A compiled explicit step and the (sender, receiver, elements) of every row for byte counts.

    Either ``groups`` (gathered by index: many small chunks) or ``slices`` applied in listed order on
    contiguous blocks (large blocks), with the :class:`Snapshot` records copied first.
    """

    index: int
    groups: tuple[Group, ...]
    slices: tuple[Slice, ...]
    snapshots: tuple[Snapshot, ...]
    src: np.ndarray
    dst: np.ndarray
    elements: np.ndarray


@dataclass(frozen=True)
class Plan:
    """A schedule compiled for one message size: size classes, compiled phases, and final copies.

    ``finals``: per size class, the :class:`Final` output slots no step writes, copied from the input at the end.
    """

    schedule: Schedule
    numel: int
    classes: tuple[SizeClass, ...]
    phases: tuple
    finals: tuple[Final, ...]


def size_classes(numel: int, num_chunks: int) -> tuple[SizeClass, ...]:
    """The non-empty chunks as at most two runs of equal size (array_split puts the larger first)."""
    sizes = chunk_sizes(numel, num_chunks)
    big = int((sizes > sizes[-1]).sum())
    runs = [(0, big, int(sizes[0])), (big, num_chunks - big, int(sizes[-1]))]
    out, start = [], 0
    for first, count, size in runs:
        if count and size:
            out.append(SizeClass(first, count, size, start))
            start += count * size
    return tuple(out)


def _class_of(classes: tuple[SizeClass, ...], chunk: np.ndarray) -> np.ndarray:
    firsts = np.array([c.first for c in classes], dtype=np.int64)
    return np.searchsorted(firsts, chunk, side="right") - 1


class Slots:
    """One boolean per (rank, non-empty chunk) slot, stored skewed: slot (r, k) is cell ``[(r - k) % N, k]``.

    Skewing makes the slots of one ring step a single row (the receiver of chunk k is ``k + d`` for one
    d), so ring phases are compiled with row operations; explicit steps index cells as usual.
    """

    def __init__(self, grid: np.ndarray):
        self.grid, self.n = grid, grid.shape[0]

    @classmethod
    def of(cls, holdings, c_ne: int) -> Slots:
        """The slots ``holdings`` (inputs or outputs) marks, without building an unskewed table for the common patterns."""
        n = holdings.world_size
        grid = np.zeros((n, c_ne), dtype=bool)
        k = np.arange(c_ne)
        if holdings.kind == "every":
            grid[:] = True
        elif holdings.kind == "root":
            grid[(holdings.arg - k) % n, k] = True
        elif holdings.kind == "own" and holdings.num_chunks == n:  # rank r holds chunk r + shift: one row
            grid[(-holdings.arg) % n] = True
        else:
            mask = holdings.mask(c_ne)
            r, kk = np.nonzero(mask)
            grid[(r - kk) % n, kk] = True
        return cls(grid)

    def row(self, d) -> int | np.ndarray:
        return d % self.n

    def get(self, rank: np.ndarray, chunk: np.ndarray) -> np.ndarray:
        return self.grid[(rank - chunk) % self.n, chunk]

    def put(self, rank: np.ndarray, chunk: np.ndarray, value) -> None:
        self.grid[(rank - chunk) % self.n, chunk] = value

    def nonzero(self) -> tuple[np.ndarray, np.ndarray]:
        """(ranks, chunks) of the marked slots."""
        d, k = np.nonzero(self.grid)
        return (d + k) % self.n, k


def _diagonals(phase: RingPhase, j0: int, j1: int, n: int) -> np.ndarray:
    """Skewed rows of the slots holding each chunk after j steps of the phase, ``j0 <= j < j1``."""
    return (np.arange(j0, j1) - phase.offset) % n


def _blocks(count: int, c_ne: int):
    rows = max(1, _BLOCK_CELLS // max(c_ne, 1))
    for j0 in range(0, count, rows):
        yield j0, min(count, j0 + rows)


def _liveness(schedule: Schedule, c_ne: int) -> dict[int, np.ndarray]:
    """For each ring phase (by index), which slots' values are needed after it (skewed grid, see :class:`Slots`).

    Backwards from the outputs: a slot is live before a step if the step reads it, or if it is live
    after and the step does not overwrite it first. A ring phase reads every slot on its chains (a
    reduce reads the receiver's copy); a copy phase overwrites all but the chain's first holder.
    """
    n = schedule.world_size
    live = Slots.of(schedule.outputs, c_ne)
    ends = {}
    for p in reversed(range(len(schedule.phases))):
        phase = schedule.phases[p]
        if isinstance(phase, RingPhase):
            ends[p] = live.grid.copy()
            if phase.reduce:
                live.grid[_diagonals(phase, 0, phase.count + 1, n)] = True
            else:
                live.grid[_diagonals(phase, 1, phase.count + 1, n)] = False
                live.grid[_diagonals(phase, 0, 1, n)] = True
            continue
        for step in reversed(phase):
            e = step.expanded()
            keep = e.chunk < c_ne
            src, dst, chunk, reduce = e.src[keep], e.dst[keep], e.chunk[keep], e.reduce[keep]
            _, first = np.unique(dst * c_ne + chunk, return_index=True)
            killed = first[~reduce[first]]
            live.put(dst[killed], chunk[killed], False)
            live.put(src, chunk, True)
            reads_own = first[reduce[first]]
            live.put(dst[reads_own], chunk[reads_own], True)
    return ends


def _refuse(schedule: Schedule, step: int, role: str, rank: int, chunk: int):
    raise ValueError(f"{schedule.algorithm} {schedule.collective}: step {step} {role} chunk {chunk} "
                     f"on rank {rank}, which holds no data for it yet")


def _flag_runs(flags: np.ndarray | bool, lo: int, hi: int) -> list[tuple[int, int, bool]]:
    """Maximal runs ``(start, stop, value)`` of ``flags[lo:hi]`` (a bool means every chunk has that value)."""
    if isinstance(flags, (bool, np.bool_)):
        return [(lo, hi, bool(flags))]
    f = flags[lo:hi]
    edges = [lo, *(lo + np.flatnonzero(f[1:] != f[:-1]) + 1).tolist(), hi]
    return [(a, b, bool(flags[a])) for a, b in zip(edges[:-1], edges[1:])]


def _ring_segments(classes, d: int, from_out, store, n: int) -> tuple[Segment, ...]:
    """Cut one ring step (receiver of chunk k is ``(k + d) % N``) into segments of consecutive receivers.

    Cuts fall at size-class edges, where the receiver wraps from rank N - 1 to 0, and where a flag
    changes; ``from_out``/``store`` are per-chunk arrays or one bool for every chunk.
    """
    segs = []
    for ci, c in enumerate(classes):
        lo, hi = c.first, c.first + c.count
        wrap = lo + (n - (lo + d) % n) % n  # first chunk whose receiver is rank 0
        pieces = [(lo, wrap), (wrap, hi)] if lo < wrap < hi else [(lo, hi)]
        for a0, b0 in pieces:
            for a1, b1, fo in _flag_runs(from_out, a0, b0):
                for a, b, st in _flag_runs(store, a1, b1):
                    segs.append(Segment(ci, a - c.first, b - a, (a + d) % n, fo, st))
    return tuple(segs)


def _uniform(rows: np.ndarray) -> list:
    """Per row of a bool block: the row's value if all its cells agree, else the row itself."""
    if rows.shape[1] == 0:
        return [False] * rows.shape[0]
    every, some = rows.all(axis=1), rows.any(axis=1)
    return [bool(e) if e or not s else row for e, s, row in zip(every.tolist(), some.tolist(), rows)]


def compile_schedule(schedule: Schedule, numel: int) -> Plan:
    """Check that every transfer reads data its rank holds and compile the steps into vectorised ops.

    Returns a :class:`Plan` for a ``(world_size, numel)`` message. Work is a few numpy calls per step
    (row operations on skewed slot tables for ring steps); memory is a few booleans per (rank,
    non-empty chunk) slot, at most one per element of the message.
    Raises ValueError when a step reads, or reduces into, a chunk its rank does not hold yet.
    """
    n, numel = schedule.world_size, int(numel)
    classes = size_classes(numel, schedule.num_chunks)
    c_ne = sum(c.count for c in classes)  # the non-empty chunks are the first c_ne
    sizes = chunk_sizes(numel, schedule.num_chunks)
    written = Slots(np.zeros((n, c_ne), dtype=bool))
    held = Slots.of(schedule.inputs, c_ne)
    ends = _liveness(schedule, c_ne) if any(isinstance(p, RingPhase) for p in schedule.phases) else {}
    phases, s0 = [], 0
    for p, phase in enumerate(schedule.phases):
        if isinstance(phase, RingPhase):
            phases.append(_compile_ring(schedule, phase, s0, classes, written, held, ends[p]))
            s0 += phase.count
            continue
        for step in phase:
            phases.append(_compile_step(schedule, step, s0, classes, sizes, written, held))
            s0 += 1
    want = Slots(Slots.of(schedule.outputs, c_ne).grid & ~written.grid)
    if (want.grid & ~held.grid).any():
        r, k = (int(a[0]) for a in Slots(want.grid & ~held.grid).nonzero())
        _refuse(schedule, s0, "returns", r, k)
    finals = []
    ranks, chunks = want.nonzero()
    cls = _class_of(classes, chunks) if len(chunks) else chunks
    for ci, c in enumerate(classes):
        pick = cls == ci
        if pick.any():
            finals.append(Final(ci, ranks[pick], chunks[pick] - c.first))
    return Plan(schedule, numel, classes, tuple(phases), tuple(finals))


_PLAN_CACHES: list = []


def cached_plans(builder):
    """``builder`` (hashable arguments -> :class:`Plan`) memoised for repeated calls, 64 plans at most each;
    :func:`clear_plans` forgets them all."""
    cached = lru_cache(maxsize=64)(builder)
    _PLAN_CACHES.append(cached)
    return cached


def clear_plans() -> None:
    """Forget the compiled plans kept for repeated calls (for benchmarks and tests that measure a first call)."""
    for cache in _PLAN_CACHES:
        cache.cache_clear()


def _compile_ring(schedule, phase: RingPhase, s0: int, classes, written: Slots, held: Slots, live_end) -> RingPlan:
    n, c_ne = schedule.world_size, written.grid.shape[1]
    d0 = int(_diagonals(phase, 0, 1, n)[0])
    start_ok = held.grid[d0] | written.grid[d0]
    if not start_ok.all():
        k = int(np.flatnonzero(~start_ok)[0])
        _refuse(schedule, s0, "sends", (k + d0) % n, k)
    init = _ring_segments(classes, d0, _uniform(written.grid[d0:d0 + 1])[0], True, n)
    steps = []
    for j0, j1 in _blocks(phase.count + 1, c_ne):
        j0 = max(j0, 1)
        if j0 >= j1:
            continue
        rows = _diagonals(phase, j0, j1, n)
        from_out = written.grid[rows] if phase.reduce else None
        if phase.reduce and not (held.grid[rows] | from_out).all():
            j, k = map(int, np.argwhere(~(held.grid[rows] | from_out))[0])
            _refuse(schedule, s0 + j0 + j - 1, "reduces into", (k + int(rows[j])) % n, k)
        store = live_end[rows]
        fo = _uniform(from_out) if phase.reduce else [False] * len(rows)
        for d, f, st in zip(rows.tolist(), fo, _uniform(store)):
            steps.append(_ring_segments(classes, d, f, st, n))
        # safe to mark now: a chain visits each (rank, chunk) slot once, so this phase never reads it again
        written.grid[rows] |= store
    return RingPlan(phase, s0, init, tuple(steps))


def _compile_step(schedule, step, s: int, classes, sizes: np.ndarray, written: Slots, held: Slots) -> ExplicitStep:
    e = step.expanded()
    c_ne = written.grid.shape[1]
    keep = e.chunk < c_ne
    src, dst, chunk, reduce = e.src[keep], e.dst[keep], e.chunk[keep], e.reduce[keep]
    was_written = written.get(dst, chunk)
    bad = ~(held.get(src, chunk) | written.get(src, chunk))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        _refuse(schedule, s, "sends", int(src[i]), int(chunk[i]))
    slot = dst * c_ne + chunk
    order = np.argsort(slot, kind="stable")
    sorted_slot = slot[order]
    start = np.r_[0, np.flatnonzero(sorted_slot[1:] != sorted_slot[:-1]) + 1] if len(slot) else np.zeros(0, np.int64)
    rnd = np.empty(len(slot), dtype=np.int64)  # the i-th transfer into a slot applies in round i
    rnd[order] = np.arange(len(slot)) - np.repeat(start, np.diff(np.r_[start, len(slot)]))
    bad = reduce & ~(held.get(dst, chunk) | was_written | (rnd > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        _refuse(schedule, s, "reduces into", int(dst[i]), int(chunk[i]))
    src_from_out = written.get(src, chunk)
    base_from_out = was_written | (rnd > 0)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    rows_kept = step.chunk < c_ne
    blocks = offsets[np.minimum(step.chunk + step.span, c_ne)][rows_kept] - offsets[step.chunk[rows_kept]]
    if len(blocks) and blocks.mean() >= DIRECT_CHUNK:
        slices, snapshots = _slices(e, keep, offsets, slot, src * c_ne + chunk, src_from_out, base_from_out)
        written.put(dst, chunk, True)
        return ExplicitStep(s, (), slices, snapshots, e.src, e.dst, sizes[e.chunk])
    cls = _class_of(classes, chunk) if len(chunk) else chunk
    groups = []
    for ci, c in enumerate(classes):
        rows = np.flatnonzero(cls == ci)
        if not len(rows):
            continue
        local = chunk[rows] - c.first
        rounds = []
        for r in range(int(rnd[rows].max()) + 1):
            sel = np.flatnonzero(rnd[rows] == r)
            g = rows[sel]
            rounds.append(Round(sel, dst[g], local[sel], reduce[g], base_from_out[g]))
        groups.append(Group(ci, src[rows], local, src_from_out[rows], tuple(rounds)))
    written.put(dst, chunk, True)
    return ExplicitStep(s, tuple(groups), (), (), e.src, e.dst, sizes[e.chunk])


def _slices(e, keep, offsets, dst_slot, src_slot, src_from_out, own_from_out):
    """Merge runs of consecutive chunks with the same sender, receiver and flags into element ranges (one op each).

    Slices apply in listed order, so a sent chunk that an earlier transfer of the step overwrote is read
    from a snapshot taken before the step; one overwritten only later is read in place.
    """
    # a sent chunk needs the snapshot only if an earlier transfer of the step (they apply in order) wrote it
    written_slots, first_write = np.unique(dst_slot, return_index=True)
    at = np.minimum(np.searchsorted(written_slots, src_slot), max(len(written_slots) - 1, 0))
    snapped = ((written_slots[at] == src_slot) & (first_write[at] < np.arange(len(src_slot)))
               if len(written_slots) else np.zeros(len(src_slot), dtype=bool))
    chunk, src, dst, reduce = e.chunk[keep], e.src[keep], e.dst[keep], e.reduce[keep]
    flags = np.stack([src, dst, reduce, src_from_out, own_from_out, snapped]).T
    starts = np.r_[0, np.flatnonzero((flags[1:] != flags[:-1]).any(axis=1) | (chunk[1:] != chunk[:-1] + 1)) + 1]
    stops = np.r_[starts[1:], len(chunk)]
    slices, snapshots, used = [], [], 0
    for a, b in zip(starts.tolist(), stops.tolist()):
        lo, hi = int(offsets[chunk[a]]), int(offsets[chunk[b - 1] + 1])
        snap = -1
        if snapped[a]:
            snap, used = used, used + hi - lo
            snapshots.append(Snapshot(int(src[a]), lo, hi, bool(src_from_out[a]), snap))
        slices.append(Slice(int(src[a]), int(dst[a]), lo, hi, bool(reduce[a]), bool(src_from_out[a]),
                            bool(own_from_out[a]), snap))
    return tuple(slices), tuple(snapshots)
