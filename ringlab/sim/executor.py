"""Run a :class:`~ringlab.collectives.Schedule` on the rows of one ``(world_size, numel)`` array or tensor.

The schedule is compiled once into a few vectorised operations per step: transfers are
grouped by chunk size class (``numpy.array_split`` gives at most two sizes) and by where
their operands live. A group whose (rank, chunk) pairs advance by a constant stride, as a
ring's do (the "diagonal" rank r -> chunk r - s), becomes a handful of strided views and
one in-place ufunc call per view; any other group becomes one fancy-indexed gather and
scatter. Either way no Python loop runs over ranks while data moves.

Memory: the executor writes only into the output array. A rank's chunk that has not been
written yet is read straight from the input, so the input is never copied up front; chunks
that no step writes are copied from the input at the end. Peak memory is therefore the
output plus one step's worth of gathered chunks (about ``numel`` elements).

Bytes are counted from the arrays actually gathered for sending at each step.

One compiled :class:`Plan` runs on numpy arrays or on torch tensors (CPU or CUDA): the few
array operations the loop needs (strided views, gather, scatter, the reduction) go through a
small backend adapter chosen from the type of the output, so both share this one loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringlab.collectives import Schedule, chunk_sizes

_INPUT, _OUTPUT = 0, 1  # where an operand is read from


@dataclass(frozen=True)
class _Op:
    """A vectorised group of transfers of one step: same size class, same operand locations."""

    size_class: int
    reduce: bool
    src_from: int
    base_from: int  # for reduce: where the receiver's own copy lives
    src_rank: np.ndarray
    src_chunk: np.ndarray  # chunk index local to the size class
    dst_rank: np.ndarray
    dst_chunk: np.ndarray
    chunk: np.ndarray  # global chunk index, for traces
    segments: tuple | None = None  # strided runs ((src run), (dst run)) when the group is regular


# A run is (rank0, chunk0, rank step, chunk step, length): the slots it covers lie on a line.
_MAX_RUNS = 8


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


def _segments(src_rank, src_chunk, dst_rank, dst_chunk):
    """Strided runs covering a group, cut where either side changes stride; None if too irregular."""
    order = np.lexsort((dst_rank, dst_chunk))
    cols = [a[order] for a in (src_rank, src_chunk, dst_rank, dst_chunk)]
    cuts = set()
    for rank, chunk in ((cols[0], cols[1]), (cols[2], cols[3])):
        start = 0
        for run in _runs(rank, chunk):
            start += run[4]
            cuts.add(start)
    if len(cuts) > _MAX_RUNS:
        return None
    segments, start = [], 0
    for stop in sorted(cuts):
        src = _runs(cols[0][start:stop], cols[1][start:stop])
        dst = _runs(cols[2][start:stop], cols[3][start:stop])
        segments.append((src[0], dst[0]))
        start = stop
    return tuple(segments)


@dataclass(frozen=True)
class Plan:
    """A schedule compiled for one message size: per step, the ordered rounds of ops."""

    schedule: Schedule
    numel: int
    bounds: tuple[tuple[int, int, int], ...]  # per size class: (first chunk, n chunks, chunk numel)
    steps: tuple[tuple[tuple[_Op, ...], ...], ...]  # step -> rounds -> ops
    finals: tuple[_Op, ...]  # copies of output chunks never written by a step


def _size_classes(numel: int, num_chunks: int) -> tuple[tuple[int, int, int], ...]:
    """array_split layout as (first chunk, count, size) runs; chunks of a run are contiguous."""
    sizes = chunk_sizes(numel, num_chunks)
    big = int((sizes > sizes[-1]).sum())
    runs = [(0, big, int(sizes[0])), (big, num_chunks - big, int(sizes[-1]))]
    return tuple(run for run in runs if run[1] > 0)


def compile_schedule(schedule: Schedule, numel: int) -> Plan:
    """Check that every transfer reads defined data and group the transfers into vectorised ops.

    Raises ValueError when a step reads, or reduces into, a chunk its rank does not hold yet.
    """
    n, c = schedule.world_size, schedule.num_chunks
    bounds = _size_classes(numel, c)
    cls = np.empty(c, dtype=np.int64)
    local = np.empty(c, dtype=np.int64)
    for k, (first, count, _) in enumerate(bounds):
        cls[first:first + count] = k
        local[first:first + count] = np.arange(count)

    in_input = np.zeros((n, c), dtype=bool)
    for r, chunks in enumerate(schedule.inputs):
        in_input[r, list(chunks)] = True
    written = np.zeros((n, c), dtype=bool)

    def where(rank: int, chunk: int, step: int, role: str) -> int:
        if written[rank, chunk]:
            return _OUTPUT
        if in_input[rank, chunk]:
            return _INPUT
        raise ValueError(f"{schedule.algorithm} {schedule.collective}: step {step} {role} chunk {chunk} "
                         f"on rank {rank}, which holds no data for it yet")

    steps = []
    for s, step in enumerate(schedule.steps):
        # Every send reads the value held at the start of the step; receivers are applied in
        # rounds so that two transfers into the same (rank, chunk) apply one after the other.
        keyed, seen = {}, {}
        for t in step:
            src_from = where(t.src, t.chunk, s, "sends")
            base_from = where(t.dst, t.chunk, s, "reduces into") if t.reduce else _OUTPUT
            rnd = seen.get((t.dst, t.chunk), 0)
            seen[(t.dst, t.chunk)] = rnd + 1
            if rnd and base_from == _INPUT:
                base_from = _OUTPUT  # the first round of this step has written it
            keyed.setdefault((rnd, int(cls[t.chunk]), t.reduce, src_from, base_from), []).append(t)
        # In-place strided ops are safe only if no slot is both read and written in the step.
        hazard = bool({(t.src, t.chunk) for t in step} & {(t.dst, t.chunk) for t in step})
        rounds: dict[int, list[_Op]] = {}
        for (rnd, k, reduce, src_from, base_from), ts in sorted(keyed.items()):
            arr = np.array([(t.src, t.dst, t.chunk) for t in ts], dtype=np.int64).reshape(-1, 3)
            src_rank, dst_rank, chunk = arr[:, 0], arr[:, 1], local[arr[:, 2]]
            segments = None if hazard else _segments(src_rank, chunk, dst_rank, chunk)
            rounds.setdefault(rnd, []).append(_Op(k, reduce, src_from, base_from, src_rank, chunk,
                                                  dst_rank, chunk, arr[:, 2], segments))
        for t in step:
            written[t.dst, t.chunk] = True
        steps.append(tuple(tuple(ops) for _, ops in sorted(rounds.items())))

    finals = []
    for k, (first, count, _) in enumerate(bounds):
        ranks, chunks = [], []
        for r, out_chunks in enumerate(schedule.outputs):
            for ch in out_chunks:
                if first <= ch < first + count and not written[r, ch]:
                    where(r, ch, len(schedule.steps), "returns")
                    ranks.append(r)
                    chunks.append(ch)
        if ranks:
            rk, ch = np.array(ranks, dtype=np.int64), np.array(chunks, dtype=np.int64)
            finals.append(_Op(k, False, _INPUT, _OUTPUT, rk, local[ch], rk, local[ch], ch))
    return Plan(schedule, int(numel), bounds, tuple(steps), tuple(finals))


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
    def segment(src, base, target, src_run, dst_run):
        """Strided views ``(read, own copy or None, write)`` of one pair of runs, each ``(length, size)``."""
        return _strided(src, src_run), None if base is None else _strided(base, dst_run), _strided(target, dst_run)

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

    def segment(self, src, base, target, src_run, dst_run):
        if self._stride(target, dst_run) < 0:
            src_run, dst_run = _reverse(src_run), _reverse(dst_run)
        own = None if base is None else self._view(base, dst_run)
        return self._view(src, src_run), own, self._view(target, dst_run)

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
    sources = {_INPUT: ins, _OUTPUT: outs}
    sent = np.zeros((len(plan.steps), n), dtype=np.int64)
    received = np.zeros_like(sent)
    log: list[tuple] = []
    for s, rounds in enumerate(plan.steps):
        # gather what the irregular groups send before anything in this step is received
        payloads = [[None if op.segments else xp.gather(sources[op.src_from][op.size_class], op.src_rank, op.src_chunk)
                     for op in ops] for ops in rounds]
        for ops, vals_list in zip(rounds, payloads):
            for op, vals in zip(ops, vals_list):
                src, base, target = (sources[op.src_from][op.size_class], sources[op.base_from][op.size_class],
                                     outs[op.size_class])
                if op.segments:
                    moved = 0
                    for src_run, dst_run in op.segments:
                        sv, bv, dv = xp.segment(src, base if op.reduce else None, target, src_run, dst_run)
                        if op.reduce:
                            combine(bv, sv, out=dv)
                        else:
                            dv[...] = sv
                        moved += sv.nbytes
                else:
                    moved = vals.nbytes
                    if op.reduce:
                        acc = xp.gather(base, op.dst_rank, op.dst_chunk)
                        combine(acc, vals, out=acc)
                        vals = acc
                    xp.scatter(target, op.dst_rank, op.dst_chunk, vals)
                per_transfer = moved // len(op.src_rank)
                sent[s] += np.bincount(op.src_rank, minlength=n) * per_transfer
                received[s] += np.bincount(op.dst_rank, minlength=n) * per_transfer
                if trace:
                    log.append((s, op, per_transfer))
    for op in plan.finals:
        vals = xp.gather(ins[op.size_class], op.src_rank, op.src_chunk)
        xp.scatter(outs[op.size_class], op.dst_rank, op.dst_chunk, vals)
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
