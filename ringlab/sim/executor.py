"""Run a :class:`~ringlab.collectives.Schedule` on the rows of one ``(world_size, numel)`` array or tensor.

The schedule is compiled once into a few vectorised operations per step: transfers are
grouped by chunk size class (``numpy.array_split`` gives at most two sizes) and by where
their operands live. A group whose (rank, chunk) pairs advance by a constant stride, as a
ring's do (the "diagonal" rank r -> chunk r - s), becomes a handful of strided views and
one in-place ufunc call per view; any other group becomes one fancy-indexed gather and
scatter. Either way no Python loop runs over ranks while data moves.

Memory: a rank's chunk that has not been written yet is read straight from the input, so the
input is never copied up front. Only final values are written into the output array; a
value that will be overwritten or that dies (a partial sum on its way round the ring) lives in
a small scratch block recycled after its last read, so it costs no trip through the large,
strided output. Chunks that no step writes are copied from the input at the end. For the ring
the scratch holds two steps' worth of chunks (about ``2 * numel`` elements).

Bytes are counted from the arrays actually gathered for sending at each step.

One compiled :class:`Plan` runs on numpy arrays or on torch tensors (CPU or CUDA): the few
array operations the loop needs (strided views, gather, scatter, the reduction) go through a
small backend adapter chosen from the type of the output, so both share this one loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringlab.collectives import Schedule, chunk_sizes

_INPUT, _OUTPUT = 0, 1  # view ids; scratch block b is view 2 + b


@dataclass(frozen=True)
class _Op:
    """A vectorised group of transfers of one step (one size class, one view per operand).

    Logical fields say what moved (for byte counts and traces); ``*_at`` give where each operand
    lives physically: (rank, chunk) in the input or output view, (0, row) in a scratch block.
    """

    size_class: int
    reduce: bool
    src_view: int
    base_view: int  # where the receiver's current copy lives (reduce only)
    dst_view: int
    src_at: np.ndarray  # (k, 2)
    base_at: np.ndarray | None  # (k, 2) for reduce
    dst_at: np.ndarray  # (k, 2)
    src_rank: np.ndarray  # logical sender of each transfer
    dst_rank: np.ndarray
    chunk: np.ndarray  # global chunk index, for traces
    segments: tuple | None = None  # strided runs (src, base or None, dst) when the group is regular


# A run is (row0, col0, row step, col step, length): the slots it covers lie on a line.
_MAX_RUNS = 8
_BIG_CHUNK = 1 << 15


def _runs(rank: np.ndarray, chunk: np.ndarray) -> list[tuple[int, int, int, int, int]]:
    """Split consecutive (rank, chunk) pairs into maximal runs of constant stride."""
    runs, i, k = [], 0, len(rank)
    while i < k:
        j = i + 1
        if j < k:
            step = (rank[j] - rank[i], chunk[j] - chunk[i])
            while j + 1 < k and (rank[j + 1] - rank[j], chunk[j + 1] - chunk[j]) == step:
                j += 1
            j += 1
        else:
            step = (0, 0)
        runs.append((int(rank[i]), int(chunk[i]), int(step[0]), int(step[1]), j - i))
        i = j
    return runs


def _segments(sides: list[np.ndarray | None], chunk_numel: int):
    """Strided runs covering a group, cut where any side changes stride; None if too irregular.

    ``sides`` are (k, 2) coordinate arrays (src, base or None, dst) in the group's order. Each
    run costs a few Python calls (tens of microseconds) while a gather costs two extra copies of
    the data, so runs are used when there are at most ``_MAX_RUNS`` of them, when they average at
    least four transfers, or when chunks are so large (``_BIG_CHUNK`` elements) that copying
    dominates anyway.
    """
    present = [a for a in sides if a is not None]
    cuts = set()
    for at in present:
        start = 0
        for run in _runs(at[:, 0], at[:, 1]):
            start += run[4]
            cuts.add(start)
    if chunk_numel < _BIG_CHUNK and len(cuts) > max(_MAX_RUNS, len(present[0]) // 4):
        return None
    segments, start = [], 0
    for stop in sorted(cuts):
        segments.append(tuple(None if at is None else _runs(at[start:stop, 0], at[start:stop, 1])[0]
                              for at in sides))
        start = stop
    return tuple(segments)


@dataclass(frozen=True)
class Plan:
    """A schedule compiled for one message size: per step, the ordered rounds of ops.

    ``blocks`` lists the scratch buffers as (size class, rows): transient values (partial
    results that are overwritten or die before the end) live there, so only final values are
    written into the output array.
    """

    schedule: Schedule
    numel: int
    bounds: tuple[tuple[int, int, int], ...]  # per size class: (first chunk, n chunks, chunk numel)
    steps: tuple[tuple[tuple[_Op, ...], ...], ...]  # step -> rounds -> ops
    finals: tuple[_Op, ...]  # copies of output chunks never written by a step
    blocks: tuple[tuple[int, int], ...] = ()


def _rows(k: int) -> np.ndarray:
    """Coordinates (0, 0) .. (0, k - 1): consecutive rows of a scratch block."""
    return np.stack([np.zeros(k, dtype=np.int64), np.arange(k, dtype=np.int64)], axis=1)


def _best_order(items, reduce: bool, to_out: bool, local, chunk_numel: int):
    """Order a group's transfers chunk-major or rank-major, whichever needs fewer strided runs.

    ``items`` are (index, transfer, src location, base location). Returns the ordered items and
    their segments (None when neither order is regular enough).
    """
    best = None
    for key in (lambda it: (it[1].chunk, it[1].dst), lambda it: (it[1].dst, it[1].chunk)):
        ordered = sorted(items, key=key)
        src_at = np.array([src[1:] for _, _, src, _ in ordered], dtype=np.int64).reshape(-1, 2)
        base_at = np.array([base[1:] for *_, base in ordered], dtype=np.int64).reshape(-1, 2) if reduce else None
        dst_at = (np.array([(t.dst, local[t.chunk]) for _, t, _, _ in ordered], dtype=np.int64) if to_out
                  else _rows(len(ordered)))
        segments = _segments([src_at, base_at, dst_at], chunk_numel)
        if best is None or (segments is not None and (best[1] is None or len(segments) < len(best[1]))):
            best = (ordered, segments)
    return best


def _size_classes(numel: int, num_chunks: int) -> tuple[tuple[int, int, int], ...]:
    """array_split layout as (first chunk, count, size) runs; chunks of a run are contiguous."""
    sizes = chunk_sizes(numel, num_chunks)
    big = int((sizes > sizes[-1]).sum())
    runs = [(0, big, int(sizes[0])), (big, num_chunks - big, int(sizes[-1]))]
    return tuple(run for run in runs if run[1] > 0)


def _rounds(step) -> list[int]:
    """Round of each transfer: the k-th transfer into the same (rank, chunk) in a step applies in round k."""
    seen: dict = {}
    rounds = []
    for t in step:
        rounds.append(seen.get((t.dst, t.chunk), 0))
        seen[(t.dst, t.chunk)] = rounds[-1] + 1
    return rounds


def _liveness(schedule: Schedule):
    """Which writes are final output values, and the last step that reads each write.

    A write is named by ``(step, index of the transfer in the step)``. Sends read the values
    held at the start of their step; a reduce also reads the receiver's current value.
    """
    outputs = {(r, c) for r, chunks in enumerate(schedule.outputs) for c in chunks}
    current: dict = {}  # slot -> write holding its value
    last_read: dict = {}
    last_write: dict = {}
    for s, step in enumerate(schedule.steps):
        for t in step:
            if (t.src, t.chunk) in current:
                last_read[current[(t.src, t.chunk)]] = s
        rounds = _rounds(step)
        for rnd in range(max(rounds, default=-1) + 1):
            for i, t in enumerate(step):
                if rounds[i] == rnd:
                    slot = (t.dst, t.chunk)
                    if t.reduce and slot in current:
                        last_read[current[slot]] = s
                    current[slot] = last_write[slot] = (s, i)
    return {w for slot, w in last_write.items() if slot in outputs}, last_read


def compile_schedule(schedule: Schedule, numel: int) -> Plan:
    """Check that every transfer reads defined data and group the transfers into vectorised ops.

    Every value a step produces goes either to the output array (when it is the final value of
    an output chunk) or to a scratch block that is recycled once the value has been read for the
    last time. Because no step writes where the same step reads, each regular group can run as
    in-place strided ufunc calls.

    Raises ValueError when a step reads, or reduces into, a chunk its rank does not hold yet.
    """
    n, c = schedule.world_size, schedule.num_chunks
    bounds = _size_classes(numel, c)
    cls = np.empty(c, dtype=np.int64)
    local = np.empty(c, dtype=np.int64)
    for k, (first, count, _) in enumerate(bounds):
        cls[first:first + count] = k
        local[first:first + count] = np.arange(count)
    final, last_read = _liveness(schedule)

    loc: dict = {}  # (rank, chunk) -> (view, row, col) of its current value
    for r, chunks in enumerate(schedule.inputs):
        for ch in chunks:
            loc[(r, ch)] = (_INPUT, r, int(local[ch]))
    blocks: list[list] = []  # [size class, rows, busy rows]
    free: list[int] = []
    releases: dict[int, list] = {}  # step -> [(block, row)] to free at its end
    holder: dict = {}  # write id -> (block, row)

    def where(rank: int, chunk: int, step: int, role: str, table: dict):
        try:
            return table[(rank, chunk)]
        except KeyError:
            raise ValueError(f"{schedule.algorithm} {schedule.collective}: step {step} {role} chunk {chunk} "
                             f"on rank {rank}, which holds no data for it yet") from None

    def allocate(size_class: int, rows: int) -> int:
        for b in free:
            if blocks[b][0] == size_class and blocks[b][1] >= rows:
                free.remove(b)
                return b
        blocks.append([size_class, rows, 0])
        return len(blocks) - 1

    steps = []
    for s, step in enumerate(schedule.steps):
        start = {(t.src, t.chunk): where(t.src, t.chunk, s, "sends", loc) for t in step}
        rounds_of = _rounds(step)
        step_ops = []
        for rnd in range(max(rounds_of, default=-1) + 1):
            groups: dict = {}
            for i, t in enumerate(step):
                if rounds_of[i] != rnd:
                    continue
                src = start[(t.src, t.chunk)]
                base = where(t.dst, t.chunk, s, "reduces into", loc) if t.reduce else None
                to_out = (s, i) in final
                key = (int(cls[t.chunk]), t.reduce, src[0], None if base is None else base[0], to_out)
                groups.setdefault(key, []).append((i, t, src, base))
            ops = []
            for (k, reduce, src_view, base_view, to_out), items in sorted(groups.items(), key=lambda kv: str(kv[0])):
                items, segments = _best_order(items, reduce, to_out, local, bounds[k][2])
                if to_out:
                    dst_view = _OUTPUT
                    dst_at = np.array([(t.dst, local[t.chunk]) for _, t, _, _ in items], dtype=np.int64)
                else:
                    b = allocate(k, len(items))
                    dst_view = 2 + b
                    dst_at = _rows(len(items))
                src_at = np.array([src[1:] for _, _, src, _ in items], dtype=np.int64).reshape(-1, 2)
                base_at = np.array([base[1:] for *_, base in items], dtype=np.int64).reshape(-1, 2) if reduce else None
                logical = np.array([(t.src, t.dst, t.chunk) for _, t, _, _ in items], dtype=np.int64).reshape(-1, 3)
                ops.append(_Op(k, reduce, src_view, -1 if base_view is None else base_view, dst_view, src_at,
                               base_at, dst_at, logical[:, 0], logical[:, 1], logical[:, 2], segments))
                for row, (i, t, _, _) in enumerate(items):
                    loc[(t.dst, t.chunk)] = (dst_view, int(dst_at[row, 0]), int(dst_at[row, 1]))
                    if not to_out:
                        blocks[dst_view - 2][2] += 1
                        holder[(s, i)] = (dst_view - 2, row)
                        releases.setdefault(last_read.get((s, i), s), []).append((s, i))
            step_ops.append(tuple(ops))
        for w in releases.pop(s, []):
            b, _ = holder.pop(w)
            blocks[b][2] -= 1
            if blocks[b][2] == 0:
                free.append(b)
        steps.append(tuple(step_ops))

    finals = []
    for k, (first, count, _) in enumerate(bounds):
        ranks, chunks = [], []
        for r, out_chunks in enumerate(schedule.outputs):
            for ch in out_chunks:
                if first <= ch < first + count and where(r, ch, len(schedule.steps), "returns", loc)[0] == _INPUT:
                    ranks.append(r)
                    chunks.append(ch)
        if ranks:
            rk, ch = np.array(ranks, dtype=np.int64), np.array(chunks, dtype=np.int64)
            at = np.stack([rk, local[ch]], axis=1)
            finals.append(_Op(k, False, _INPUT, -1, _OUTPUT, at, None, at, rk, rk, ch))
    return Plan(schedule, int(numel), bounds, tuple(steps), tuple(finals),
                tuple((size_class, rows) for size_class, rows, _ in blocks))


def _reverse(run):
    """The same slots walked backwards (so a negative stride becomes a positive one)."""
    rank0, chunk0, d_rank, d_chunk, length = run
    return (rank0 + (length - 1) * d_rank, chunk0 + (length - 1) * d_chunk, -d_rank, -d_chunk, length)


class _NumpyBackend:
    """Array operations the executor needs, on numpy arrays (strides in bytes, any sign)."""

    @staticmethod
    def class_view(arr, start: int, stop: int, count: int, size: int):
        return arr[:, start:stop].reshape(arr.shape[0], count, size)

    @staticmethod
    def segment(src, base, target, src_run, base_run, dst_run):
        """Strided views ``(read, own copy or None, write)`` of one set of runs, each ``(length, size)``."""
        return _strided(src, src_run), None if base is None else _strided(base, base_run), _strided(target, dst_run)

    @staticmethod
    def scratch(like, rows: int, size: int):
        """An uninitialised (1, rows, size) buffer of ``like``'s dtype for transient values."""
        return np.empty((1, rows, size), dtype=like.dtype)

    @staticmethod
    def gather(view, rank, chunk):
        return view[rank, chunk]

    @staticmethod
    def scatter(view, rank, chunk, vals) -> None:
        view[rank, chunk] = vals

    @staticmethod
    def combine(ufunc):
        return ufunc


def _strided(view: np.ndarray, run) -> np.ndarray:
    """The chunks of ``run`` in a (world_size, chunks, size) view, as one (length, size) strided view."""
    rank0, chunk0, d_rank, d_chunk, length = run
    start = view[rank0, chunk0]
    stride = d_rank * view.strides[0] + d_chunk * view.strides[1]
    return np.lib.stride_tricks.as_strided(start, shape=(length, view.shape[2]), strides=(stride, view.strides[2]))


class _TorchBackend:
    """The same operations on torch tensors (CPU or CUDA): strides in elements, never negative.

    A run whose stride would be negative is walked backwards; when only one side of a pair can
    be made positive, the side that is only read is materialised by ``flip`` (a copy).
    """

    def __init__(self, torch, device):
        self.torch, self.device = torch, device

    @staticmethod
    def class_view(arr, start: int, stop: int, count: int, size: int):
        return arr[:, start:stop].view(arr.shape[0], count, size)  # view(): raises rather than copies

    @staticmethod
    def _stride(view, run) -> int:
        return run[2] * view.stride(0) + run[3] * view.stride(1)

    def _view(self, view, run):
        if self._stride(view, run) < 0:
            return self.torch.flip(self._view(view, _reverse(run)), (0,))
        rank0, chunk0, _, _, length = run
        offset = view.storage_offset() + rank0 * view.stride(0) + chunk0 * view.stride(1)
        return self.torch.as_strided(view, (length, view.shape[2]), (self._stride(view, run), view.stride(2)), offset)

    def segment(self, src, base, target, src_run, base_run, dst_run):
        if self._stride(target, dst_run) < 0:
            src_run, dst_run = _reverse(src_run), _reverse(dst_run)
            base_run = None if base_run is None else _reverse(base_run)
        own = None if base is None else self._view(base, base_run)
        return self._view(src, src_run), own, self._view(target, dst_run)

    def scratch(self, like, rows: int, size: int):
        return self.torch.empty((1, rows, size), dtype=like.dtype, device=like.device)

    def _index(self, idx: np.ndarray):
        return self.torch.from_numpy(idx).to(self.device)

    def gather(self, view, rank, chunk):
        return view[self._index(rank), self._index(chunk)]

    def scatter(self, view, rank, chunk, vals) -> None:
        view[self._index(rank), self._index(chunk)] = vals

    def combine(self, ufunc):
        """The torch function named like the numpy ufunc (add, multiply, maximum, minimum)."""
        return getattr(self.torch, ufunc.__name__)


def _backend(arr):
    """Pick the array adapter from the type of ``arr`` without importing torch for numpy input."""
    if isinstance(arr, np.ndarray):
        return _NumpyBackend
    if type(arr).__module__.startswith("torch"):
        import torch

        return _TorchBackend(torch, arr.device)
    raise TypeError(f"arrays must be numpy.ndarray or torch.Tensor, got {type(arr).__name__}")


def _class_views(arr, bounds, xp) -> list:
    """Views of a (world_size, numel) array as (world_size, chunks, chunk numel), one per size class."""
    views, start = [], 0
    for _, count, size in bounds:
        stop = start + count * size
        views.append(xp.class_view(arr, start, stop, count, size))
        start = stop
    return views


@dataclass
class Events:
    """Per-transfer record of a traced run; parallel int64/bool arrays of equal length."""

    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    reduce: np.ndarray
    nbytes: np.ndarray


def execute(plan: Plan, inputs, out, ufunc, trace: bool = False):
    """Run ``plan`` reading ``inputs`` and writing ``out`` (both ``(world_size, numel)``).

    ``inputs`` and ``out`` are numpy arrays or torch tensors (CPU or CUDA, same device), picked
    from the type of ``out``; torch is imported only for tensors. ``ufunc`` is the numpy ufunc
    of the reduction (np.add, np.multiply, np.maximum, np.minimum); on tensors the torch function
    of the same name runs. ``out`` may already hold data for chunks the schedule lists as
    inputs (``inputs=None``). Returns ``(sent, received, events)``: int64 numpy arrays of shape
    ``(num_steps, world_size)`` and an :class:`Events` (or None when ``trace`` is False).
    """
    n = plan.schedule.world_size
    xp = _backend(out)
    combine = None if ufunc is None else xp.combine(ufunc)
    outs = _class_views(out, plan.bounds, xp)
    ins = _class_views(inputs, plan.bounds, xp) if inputs is not None else outs
    scratch = [xp.scratch(out, rows, plan.bounds[k][2]) for k, rows in plan.blocks]

    def view(view_id: int, size_class: int):
        return ins[size_class] if view_id == _INPUT else outs[size_class] if view_id == _OUTPUT else scratch[view_id - 2]

    sent = np.zeros((len(plan.steps), n), dtype=np.int64)
    received = np.zeros_like(sent)
    log: list[tuple] = []
    for s, rounds in enumerate(plan.steps):
        for ops in rounds:
            for op in ops:
                src, target = view(op.src_view, op.size_class), view(op.dst_view, op.size_class)
                base = view(op.base_view, op.size_class) if op.reduce else None
                if op.segments:
                    moved = 0
                    for src_run, base_run, dst_run in op.segments:
                        sv, bv, dv = xp.segment(src, base, target, src_run, base_run, dst_run)
                        if op.reduce:
                            combine(bv, sv, out=dv)
                        else:
                            dv[...] = sv
                        moved += sv.nbytes
                else:
                    vals = xp.gather(src, op.src_at[:, 0], op.src_at[:, 1])
                    moved = vals.nbytes
                    if op.reduce:
                        acc = xp.gather(base, op.base_at[:, 0], op.base_at[:, 1])
                        combine(acc, vals, out=acc)
                        vals = acc
                    xp.scatter(target, op.dst_at[:, 0], op.dst_at[:, 1], vals)
                per_transfer = moved // len(op.src_rank)
                sent[s] += np.bincount(op.src_rank, minlength=n) * per_transfer
                received[s] += np.bincount(op.dst_rank, minlength=n) * per_transfer
                if trace:
                    log.append((s, op, per_transfer))
    for op in plan.finals:
        vals = xp.gather(ins[op.size_class], op.src_at[:, 0], op.src_at[:, 1])
        xp.scatter(outs[op.size_class], op.dst_at[:, 0], op.dst_at[:, 1], vals)
    events = _events(log) if trace else None
    return sent, received, events


def _events(log) -> Events:
    cols = {name: [] for name in ("step", "src", "dst", "chunk", "reduce", "nbytes")}
    for s, op, per_transfer in log:
        k = len(op.src_rank)
        cols["step"].append(np.full(k, s))
        cols["src"].append(op.src_rank)
        cols["dst"].append(op.dst_rank)
        cols["chunk"].append(op.chunk)
        cols["reduce"].append(np.full(k, op.reduce))
        cols["nbytes"].append(np.full(k, per_transfer))
    arrays = {name: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for name, v in cols.items()}
    order = np.lexsort((arrays["src"], arrays["step"]))
    return Events(**{name: a[order] for name, a in arrays.items()})
