"""Run a compiled :class:`~ringlab.sim.plan.Plan` on one ``(world_size, numel)`` array or tensor.

Three parts, in reading order: :mod:`ringlab.sim.plan` decides, once per (schedule, numel), where
every value lives and which operations each step needs; :mod:`ringlab.sim.backends` supplies the
few array operations for numpy or torch; this module runs the loop and counts the bytes.

A ring step is a handful of strided views, each a run of consecutive ranks holding consecutive
chunks: the receivers' own copies are combined into the carry (``own = op(own, incoming)``, the
operand order of :mod:`ringlab.sim.interpret`), and the result is written out where it is needed.
An explicit step gathers every value it sends first (the start-of-step snapshot), then applies
its transfers round by round. Bytes are counted from what each step moved: per run of chunks on
ring steps, with ``np.bincount`` on the step's arrays otherwise.

The schedule's meaning is :func:`ringlab.sim.interpret.interpret`; tests hold the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringlab.collectives import chunk_sizes

from .backends import backend_for
from .plan import Plan, RingPlan, compile_schedule

__all__ = ["Counts", "Events", "compile_schedule", "execute"]

# Per-step per-rank byte tables are kept up to this many cells (steps x world_size, a ring of about 180
# ranks); beyond, only per-rank totals and per-step totals and maxima, so counting never outweighs the data.
TABLE_CELLS = 1 << 16


@dataclass
class Events:
    """Per-transfer record of a traced run; parallel int64/bool arrays of equal length."""

    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    reduce: np.ndarray
    nbytes: np.ndarray


@dataclass(frozen=True)
class Counts:
    """Bytes the executor moved.

    ``bytes_sent``/``bytes_received``: int64 ``(world_size,)``. ``step_total``, ``step_max_sent``,
    ``step_max_received``: int64 ``(num_steps,)``, all ranks together and the busiest rank.
    ``per_step_sent``/``per_step_received``: int64 ``(num_steps, world_size)`` when that table has at
    most ``TABLE_CELLS`` cells, else None.
    """

    bytes_sent: np.ndarray
    bytes_received: np.ndarray
    step_total: np.ndarray
    step_max_sent: np.ndarray
    step_max_received: np.ndarray
    per_step_sent: np.ndarray | None
    per_step_received: np.ndarray | None


class _Counter:
    """Bytes per rank (and per step when the table is small). Ring steps add to runs of consecutive
    ranks, recorded as +b / -b at the run's ends of a difference table (O(1) per run, summed once)."""

    def __init__(self, n: int, steps: int, router=None):
        self.n, self.router = n, router
        self.table = steps * n <= TABLE_CELLS
        rows = steps if self.table else 1
        self.sent, self.received = np.zeros((rows, n), dtype=np.int64), np.zeros((rows, n), dtype=np.int64)
        self.sent_runs, self.received_runs = np.zeros((rows, n + 1), dtype=np.int64), np.zeros((rows, n + 1), dtype=np.int64)
        self.total = np.zeros(steps, dtype=np.int64)
        self.max_sent, self.max_received = np.zeros(steps, dtype=np.int64), np.zeros(steps, dtype=np.int64)

    def ring(self, s: int, r0: int, length: int, nbytes: int) -> None:
        """Receivers ``r0 .. r0 + length - 1`` each got ``nbytes`` from their predecessor."""
        row = s if self.table else 0
        self.received_runs[row, r0] += nbytes
        self.received_runs[row, r0 + length] -= nbytes
        first = r0 - 1 if r0 else self.n - 1  # rank 0's predecessor is the last rank
        if first + length <= self.n:
            self.sent_runs[row, first] += nbytes
            self.sent_runs[row, first + length] -= nbytes
        else:
            self.sent_runs[row, first] += nbytes
            self.sent_runs[row, self.n] -= nbytes
            self.sent_runs[row, 0] += nbytes
            self.sent_runs[row, first + length - self.n] -= nbytes
        self.total[s] += length * nbytes
        if self.router is not None:
            dst = (r0 + np.arange(length)) % self.n
            self.router(s, (dst - 1) % self.n, dst, np.full(length, nbytes, dtype=np.int64))
        if nbytes > self.max_sent[s]:
            self.max_sent[s] = self.max_received[s] = nbytes

    def explicit(self, s: int, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> None:
        if self.router is not None:
            self.router(s, src, dst, nbytes)
        w = nbytes.astype(np.float64)  # exact: a step's bytes per rank stay far below 2**53
        sent = np.bincount(src, w, minlength=self.n).astype(np.int64)
        received = np.bincount(dst, w, minlength=self.n).astype(np.int64)
        row = s if self.table else 0
        self.sent[row] += sent
        self.received[row] += received
        self.total[s] += int(sent.sum())
        self.max_sent[s], self.max_received[s] = sent.max(initial=0), received.max(initial=0)

    def counts(self) -> Counts:
        sent = self.sent + np.cumsum(self.sent_runs, axis=1)[:, :self.n]
        received = self.received + np.cumsum(self.received_runs, axis=1)[:, :self.n]
        table = (sent, received) if self.table else (None, None)
        return Counts(sent.sum(axis=0), received.sum(axis=0), self.total, self.max_sent, self.max_received, *table)


def _gather(xp, ins, outs, rank, chunk, from_out):
    """Values of slots (rank[i], chunk[i]), each from ``out`` or the input as ``from_out`` says (a copy)."""
    if from_out.all():
        return xp.gather(outs, rank, chunk)
    vals = xp.gather(ins, rank, chunk)
    if from_out.any():
        i = np.flatnonzero(from_out)
        xp.set_rows(vals, i, xp.gather(outs, rank[i], chunk[i]))
    return vals


def _rows(vals, idx: np.ndarray):
    """``vals[idx]``, without the copy when idx is every row in order."""
    return vals if len(idx) == len(vals) and (idx[-1:] == len(vals) - 1).all() else vals[idx]


def _run_ring(xp, ring: RingPlan, ins, outs, carries, combine, counter, itemsize: int, classes) -> None:
    for seg in ring.init:  # the carry starts as each chain's first holder's copy
        src = (outs if seg.from_out else ins)[seg.cls]
        carries[seg.cls][seg.k0:seg.k0 + seg.length] = xp.diagonal(src, seg.r0, seg.k0, seg.length)
    reduce = ring.phase.reduce
    for s, segs in enumerate(ring.steps, start=ring.first_step):
        for seg in segs:
            cv = carries[seg.cls][seg.k0:seg.k0 + seg.length]
            if reduce:
                own = xp.diagonal((outs if seg.from_out else ins)[seg.cls], seg.r0, seg.k0, seg.length)
                combine(own, cv, out=cv)
            if seg.store:
                xp.diagonal(outs[seg.cls], seg.r0, seg.k0, seg.length)[...] = cv
            counter.ring(s, seg.r0, seg.length, classes[seg.cls].size * itemsize)


def _run_step(xp, step, ins, outs, flat_in, flat_out, combine, counter, itemsize: int) -> None:
    if step.slices:  # large blocks: in place, one slice op per block, in listed order
        snap = xp.empty(flat_out, (sum(c.hi - c.lo for c in step.snapshots),))
        for c in step.snapshots:  # values the step overwrites before sending them
            snap[c.offset:c.offset + c.hi - c.lo] = (flat_out if c.from_out else flat_in)[c.rank, c.lo:c.hi]
        for t in step.slices:
            sv = snap[t.snap:t.snap + t.hi - t.lo] if t.snap >= 0 else (flat_out if t.src_from_out else flat_in)[t.src, t.lo:t.hi]
            target = flat_out[t.dst, t.lo:t.hi]
            if t.reduce:
                combine((flat_out if t.own_from_out else flat_in)[t.dst, t.lo:t.hi], sv, out=target)
            else:
                target[...] = sv
    for g in step.groups:
        vals = _gather(xp, ins[g.cls], outs[g.cls], g.src_rank, g.src_chunk, g.src_from_out)
        for r in g.rounds:
            copy, reduce = ~r.reduce, r.reduce
            if copy.any():
                xp.scatter(outs[g.cls], r.dst[copy], r.chunk[copy], _rows(vals, r.rows[copy]))
            if reduce.any():
                own = _gather(xp, ins[g.cls], outs[g.cls], r.dst[reduce], r.chunk[reduce], r.own_from_out[reduce])
                combine(own, _rows(vals, r.rows[reduce]), out=own)
                xp.scatter(outs[g.cls], r.dst[reduce], r.chunk[reduce], own)
    counter.explicit(step.index, step.src, step.dst, step.elements * itemsize)


def execute(plan: Plan, inputs, out, ufunc, trace: bool = False, router=None) -> tuple[Counts, Events | None]:
    """Run ``plan`` reading ``inputs`` and writing ``out`` (both ``(world_size, numel)``).

    ``inputs`` and ``out`` are numpy arrays or torch tensors (CPU or CUDA, same device), picked from
    the type of ``out``; torch is imported only for tensors. ``ufunc`` is the numpy ufunc of the
    reduction (np.add, np.multiply, np.maximum, np.minimum; None for collectives that only copy); on
    tensors the torch function of the same name runs. ``out`` may already hold the input chunks
    (``inputs=None``, as all-gather does). Returns the :class:`Counts` of bytes moved and, with
    ``trace``, one :class:`Events` row per transfer. Output slots outside ``schedule.outputs`` are
    left undefined. ``router``, when given, is called as ``router(step, src, dst, nbytes)`` (int64 arrays, one
    row per chunk moved, in the step's expanded row order) with everything the run moves, e.g.
    :class:`ringlab.topology.traffic.LinkCounter` counting bytes per link of a cluster.
    """
    schedule = plan.schedule
    xp = backend_for(out)
    combine = None if ufunc is None else xp.combine(ufunc)
    outs = [xp.class_view(out, c.start, c.count, c.size) for c in plan.classes]
    ins = [xp.class_view(inputs, c.start, c.count, c.size) for c in plan.classes] if inputs is not None else outs
    carry = xp.empty(out, (1, plan.numel)) if any(isinstance(p, RingPlan) for p in plan.phases) else None
    carries = [xp.class_view(carry, c.start, c.count, c.size)[0] for c in plan.classes] if carry is not None else []
    itemsize = out.element_size() if hasattr(out, "element_size") else out.itemsize
    counter = _Counter(schedule.world_size, schedule.num_steps, router)
    for item in plan.phases:
        if isinstance(item, RingPlan):
            _run_ring(xp, item, ins, outs, carries, combine, counter, itemsize, plan.classes)
        else:
            _run_step(xp, item, ins, outs, inputs if inputs is not None else out, out, combine, counter, itemsize)
    if inputs is not None:
        for f in plan.finals:
            xp.scatter(outs[f.cls], f.ranks, f.chunks, xp.gather(ins[f.cls], f.ranks, f.chunks))
    return counter.counts(), (_events(schedule, plan.numel, itemsize) if trace else None)


def _events(schedule, numel: int, itemsize: int) -> Events:
    """One row per transfer, sorted by (step, sender); bytes are each chunk's size, as the steps moved them."""
    sizes = chunk_sizes(numel, schedule.num_chunks) * itemsize
    cols = {name: [] for name in ("step", "src", "dst", "chunk", "reduce", "nbytes")}
    for s, step in enumerate(schedule.steps):
        e = step.expanded()
        for name, values in (("step", np.full(len(e.src), s)), ("src", e.src), ("dst", e.dst), ("chunk", e.chunk),
                             ("reduce", e.reduce), ("nbytes", sizes[e.chunk])):
            cols[name].append(values)
    arrays = {name: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for name, v in cols.items()}
    order = np.lexsort((arrays["src"], arrays["step"]))
    return Events(**{name: a[order] for name, a in arrays.items()})
