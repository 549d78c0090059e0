"""Run a :class:`~ringlab.collectives.Schedule` on the rows of one ``(world_size, numel)`` array or tensor.

The schedule is compiled once into a few vectorised operations per step: transfers are
grouped by chunk size class (``numpy.array_split`` gives at most two sizes) and by where
their operands live. A group whose (rank, chunk) pairs advance by a constant stride, as a
ring's do (the "diagonal" rank r -> chunk r - s), becomes a handful of strided views and
one in-place ufunc call per view; any other group becomes one fancy-indexed gather and
scatter. Either way no Python loop runs over ranks while data moves.

Memory: a rank's chunk that has not been written yet is read straight from the input, so the
input is never copied up front. What a step writes into the large, strided output array is
never read back by a later step. A value that will be overwritten or that dies (a partial sum on its way round the
ring) lives in a small scratch block recycled after its last read. A reduce whose incoming
partial has no other reader overwrites that partial's row in place, so a ring's partial sums
travel round the ring in one scratch block of ``numel`` elements that stays in cache. A final
value that is forwarded later (a chunk reduce-scatter finished, which all-gather passes on)
stays in its scratch row too and is also copied into the output by its own rank, a local copy
that moves no bytes; the copies all-gather makes of it read that row. Chunks that no step
writes are copied from the input at the end.

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
    src_count: np.ndarray  # transfers each rank sends in this op, (world_size,)
    dst_count: np.ndarray  # transfers each rank receives
    segments: tuple | None = None  # strided runs (src, base or None, dst) when the group is regular
    local: bool = False  # a rank copying its own data between buffers: no traffic, not traced


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


def _best_order(items, reduce: bool, dst_of, chunk_numel: int):
    """Order a group's transfers chunk-major or rank-major, whichever needs fewer strided runs.

    ``items`` are (index, transfer, src location, base location); ``dst_of(item)`` gives the
    (row, col) an item writes, or is None when the group fills fresh scratch rows in order.
    Returns the ordered items, their write positions and their segments (None when neither
    order is regular enough).
    """
    best = None
    for key in (lambda it: (it[1].chunk, it[1].dst), lambda it: (it[1].dst, it[1].chunk)):
        ordered = sorted(items, key=key)
        src_at = np.array([src[1:] for _, _, src, _ in ordered], dtype=np.int64).reshape(-1, 2)
        base_at = np.array([base[1:] for *_, base in ordered], dtype=np.int64).reshape(-1, 2) if reduce else None
        dst_at = (_rows(len(ordered)) if dst_of is None
                  else np.array([dst_of(it) for it in ordered], dtype=np.int64).reshape(-1, 2))
        segments = _segments([src_at, base_at, dst_at], chunk_numel)
        if best is None or (segments is not None and (best[2] is None or len(segments) < len(best[2]))):
            best = (ordered, dst_at, segments)
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
    """Final writes, the storage each write's value lives in, and the last step reading each storage.

    A write is named ``(step, index of the transfer in the step)``. Pass 1 finds the final
    writes (the last write of each output slot). Pass 2 follows values: a final copy of a value
    a step produced gets no storage of its own but aliases the source's, so later sends of it
    read the compact scratch row where it was made rather than the strided output (a ring's
    all-gather forwards each chunk from the row where reduce-scatter finished it). Sends read
    the values held at the start of their step; a reduce also reads the receiver's value.
    Returns ``(final writes, {write: storage write}, {storage write: last step reading it})``.
    """
    outputs = {(r, c) for r, chunks in enumerate(schedule.outputs) for c in chunks}
    last_write: dict = {}
    for s, step in enumerate(schedule.steps):
        for i, t in enumerate(step):  # the k-th write into a slot applies in round k: index order
            last_write[(t.dst, t.chunk)] = (s, i)
    final = {w for slot, w in last_write.items() if slot in outputs}
    current: dict = {}  # slot -> storage of its value; absent while it holds its input
    storage: dict = {}
    last_read: dict = {}
    for s, step in enumerate(schedule.steps):
        sent = {(t.src, t.chunk): current.get((t.src, t.chunk)) for t in step}
        for w in sent.values():
            if w is not None:
                last_read[w] = s
        rounds = _rounds(step)
        for rnd in range(max(rounds, default=-1) + 1):
            for i, t in enumerate(step):
                if rounds[i] != rnd:
                    continue
                slot, src = (t.dst, t.chunk), sent[(t.src, t.chunk)]
                if t.reduce and current.get(slot) is not None:
                    last_read[current[slot]] = s
                alias = not t.reduce and (s, i) in final and src is not None
                storage[(s, i)] = current[slot] = src if alias else (s, i)
    return final, storage, last_read


def _reusable(step, s: int, writer: dict, last_read: dict) -> set[int]:
    """Transfers of step ``s`` that may reduce in place, into the scratch row of the partial they receive.

    That row is free to overwrite when this transfer is the last and only reader of the value
    stored there (counting every slot that aliases it, and reduce bases conservatively) and
    nothing writes into the sending slot this step. A ring's partial sums then travel round the
    ring in one scratch block instead of being copied into a fresh one every step.
    """
    reads: dict = {}
    for t in step:
        for slot in ((t.src, t.chunk), (t.dst, t.chunk)) if t.reduce else ((t.src, t.chunk),):
            w = writer.get(slot)
            reads[w] = reads.get(w, 0) + 1
    written = {(t.dst, t.chunk) for t in step}
    reuse = set()
    for i, t in enumerate(step):
        slot = (t.src, t.chunk)
        w = writer.get(slot)
        if t.reduce and w is not None and last_read.get(w) == s and reads[w] == 1 and slot not in written:
            reuse.add(i)
    return reuse


def compile_schedule(schedule: Schedule, numel: int) -> Plan:
    """Check that every transfer reads defined data and group the transfers into vectorised ops.

    Every value a step produces goes to the output array when it is a final value nobody reads
    later; to a scratch row when it is transient, recycled once the value has been read for the
    last time; or, when it is final and forwarded later, to a scratch row plus a local copy into
    the output (a final copy of such a value only writes the output and aliases the row). A step
    writes only where no other transfer of it reads (an in-place reduce overwrites just the
    elements it reads itself), so each regular group runs as strided ufunc calls in any order.

    Raises ValueError when a step reads, or reduces into, a chunk its rank does not hold yet.
    """
    n, c = schedule.world_size, schedule.num_chunks
    bounds = _size_classes(numel, c)
    cls = np.empty(c, dtype=np.int64)
    local = np.empty(c, dtype=np.int64)
    for k, (first, count, _) in enumerate(bounds):
        cls[first:first + count] = k
        local[first:first + count] = np.arange(count)
    final, storage, last_read = _liveness(schedule)

    loc: dict = {}  # (rank, chunk) -> (view, row, col) its current value is read from
    for r, chunks in enumerate(schedule.inputs):
        for ch in chunks:
            loc[(r, ch)] = (_INPUT, r, int(local[ch]))
    blocks: list[list] = []  # [size class, rows, busy rows]
    free: list[int] = []
    releases: dict[int, list] = {}  # step -> storages to free at its end
    holder: dict = {}  # storage write -> block holding it
    writer: dict = {}  # (rank, chunk) -> storage write of the value it holds in scratch

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

    def out_at(items) -> np.ndarray:
        return np.array([(t.dst, local[t.chunk]) for _, t, _, _ in items], dtype=np.int64).reshape(-1, 2)

    steps = []
    for s, step in enumerate(schedule.steps):
        start = {(t.src, t.chunk): where(t.src, t.chunk, s, "sends", loc) for t in step}
        reuse = _reusable(step, s, writer, last_read)
        rounds_of = _rounds(step)
        step_ops = []
        for rnd in range(max(rounds_of, default=-1) + 1):
            groups: dict = {}
            for i, t in enumerate(step):
                if rounds_of[i] != rnd:
                    continue
                src = start[(t.src, t.chunk)]
                base = where(t.dst, t.chunk, s, "reduces into", loc) if t.reduce else None
                stored = storage[(s, i)] == (s, i) and ((s, i) not in final or (s, i) in last_read)
                place = "scratch in place" if stored and i in reuse else "scratch" if stored else "output"
                key = (int(cls[t.chunk]), t.reduce, src[0], None if base is None else base[0], place,
                       stored and (s, i) in final)
                groups.setdefault(key, []).append((i, t, src, base))
            ops = []
            for (k, reduce, src_view, base_view, place, mirror), items in sorted(groups.items(),
                                                                                 key=lambda kv: str(kv[0])):
                dst_of = ((lambda it: (it[1].dst, local[it[1].chunk])) if place == "output"
                          else (lambda it: it[2][1:]) if place == "scratch in place" else None)
                items, dst_at, segments = _best_order(items, reduce, dst_of, bounds[k][2])
                dst_view = (_OUTPUT if place == "output" else src_view if place == "scratch in place"
                            else 2 + allocate(k, len(items)))
                src_at = np.array([src[1:] for _, _, src, _ in items], dtype=np.int64).reshape(-1, 2)
                base_at = np.array([base[1:] for *_, base in items], dtype=np.int64).reshape(-1, 2) if reduce else None
                logical = np.array([(t.src, t.dst, t.chunk) for _, t, _, _ in items], dtype=np.int64).reshape(-1, 3)
                ops.append(_Op(k, reduce, src_view, -1 if base_view is None else base_view, dst_view, src_at,
                               base_at, dst_at, logical[:, 0], logical[:, 1], logical[:, 2],
                               np.bincount(logical[:, 0], minlength=n), np.bincount(logical[:, 1], minlength=n),
                               segments))
                if mirror:  # the receiver's own copy of its final value into the output: no traffic
                    final_at = out_at(items)
                    ranks = logical[:, 1]
                    ops.append(_Op(k, False, dst_view, -1, _OUTPUT, dst_at, None, final_at, ranks, ranks,
                                   logical[:, 2], np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                                   _segments([dst_at, None, final_at], bounds[k][2]), local=True))
                for row, (i, t, src, _) in enumerate(items):
                    slot, w = (t.dst, t.chunk), storage[(s, i)]
                    if place == "output" and w != (s, i):  # an alias: later sends read the source's row
                        loc[slot], writer[slot] = src, w
                        continue
                    loc[slot] = (dst_view, int(dst_at[row, 0]), int(dst_at[row, 1]))
                    writer.pop(slot, None)
                    if place != "output":
                        blocks[dst_view - 2][2] += 1
                        holder[w] = dst_view - 2
                        writer[slot] = w
                        releases.setdefault(last_read.get(w, s), []).append(w)
            step_ops.append(tuple(ops))
        for w in releases.pop(s, []):
            b = holder.pop(w)
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
            finals.append(_Op(k, False, _INPUT, -1, _OUTPUT, at, None, at, rk, rk, ch, np.zeros(n, dtype=np.int64),
                              np.zeros(n, dtype=np.int64), local=True))
    return Plan(schedule, int(numel), bounds, tuple(steps), tuple(finals),
                tuple((size_class, rows) for size_class, rows, _ in blocks))


def _reverse(run):
    """The same slots walked backwards (so a negative stride becomes a positive one)."""
    rank0, chunk0, d_rank, d_chunk, length = run
    return (rank0 + (length - 1) * d_rank, chunk0 + (length - 1) * d_chunk, -d_rank, -d_chunk, length)


class _NumpyBackend:
    """Array operations the executor needs, on numpy arrays (strides in bytes, any sign).

    Strided views are built with the ``ndarray`` constructor on the contiguous array a view
    belongs to, about ten times cheaper than ``as_strided``; that matters because a large ring
    makes thousands of them per call. Views of non-contiguous arrays fall back to ``as_strided``.
    """

    def __init__(self):
        self._roots: dict = {}  # id(view) -> (bytes of its contiguous owner or None, byte offset of the view in them)

    @staticmethod
    def class_view(arr, start: int, stop: int, count: int, size: int):
        return arr[:, start:stop].reshape(arr.shape[0], count, size)

    def segment(self, src, base, target, src_run, base_run, dst_run):
        """Strided views ``(read, own copy or None, write)`` of one set of runs, each ``(length, size)``."""
        own = None if base is None else self._strided(base, base_run)
        return self._strided(src, src_run), own, self._strided(target, dst_run)

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

    def _root(self, view: np.ndarray):
        key = id(view)
        if key not in self._roots:
            owner = view if view.base is None else view.base
            ok = isinstance(owner, np.ndarray) and owner.flags.c_contiguous and view.size > 0
            offset = view.__array_interface__["data"][0] - owner.__array_interface__["data"][0] if ok else 0
            # as raw bytes: the buffer protocol refuses ml_dtypes' bfloat16
            self._roots[key] = (owner.reshape(-1).view(np.uint8).data if ok else None, offset)
        return self._roots[key]

    def _strided(self, view: np.ndarray, run) -> np.ndarray:
        """The chunks of ``run`` in a (world_size, chunks, size) view, as one (length, size) strided view."""
        rank0, chunk0, d_rank, d_chunk, length = run
        rank_stride, chunk_stride, elem_stride = view.strides
        stride = d_rank * rank_stride + d_chunk * chunk_stride
        owner, offset = self._root(view)
        if owner is None:
            return np.lib.stride_tricks.as_strided(view[rank0, chunk0], shape=(length, view.shape[2]),
                                                   strides=(stride, elem_stride))
        return np.ndarray((length, view.shape[2]), view.dtype, owner,
                          offset + rank0 * rank_stride + chunk0 * chunk_stride, (stride, elem_stride))


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
        return _NumpyBackend()
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
        if view_id in (_INPUT, _OUTPUT):
            return (ins if view_id == _INPUT else outs)[size_class]
        return scratch[view_id - 2]

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
                if op.local:
                    continue
                per_transfer = moved // len(op.src_rank)
                sent[s] += op.src_count * per_transfer
                received[s] += op.dst_count * per_transfer
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
