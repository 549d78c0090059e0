"""Collective algorithms as data.

A :class:`Schedule` is a list of steps; a step is a tuple of :class:`Transfer` records
``(src, dst, chunk, reduce)``. Within a step every send reads the value its source held at
the start of the step (the transfers of one step happen concurrently, as they do on a
network). With ``reduce=True`` the receiver combines the incoming chunk with its own copy
using the collective's operator; with ``reduce=False`` it overwrites its copy.

The message is split into ``num_chunks`` chunks following :func:`numpy.array_split`: the
first ``numel % num_chunks`` chunks hold one element more than the rest (see
:func:`chunk_sizes`). Executors (``ringlab.sim``, ``ringlab.dist``) interpret the same
schedule; nothing here knows about arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


class Transfer(NamedTuple):
    """One chunk moving from rank ``src`` to rank ``dst`` during a step.

    ``reduce=True`` means the receiver combines it with its own copy of ``chunk``;
    ``reduce=False`` means the receiver stores it (overwriting its copy).
    """

    src: int
    dst: int
    chunk: int
    reduce: bool


def chunk_sizes(numel: int, num_chunks: int) -> np.ndarray:
    """Element count of each chunk when ``numel`` elements are split into ``num_chunks``.

    Follows :func:`numpy.array_split`: the first ``numel % num_chunks`` chunks get
    ``numel // num_chunks + 1`` elements, the others ``numel // num_chunks`` (possibly 0).

    Returns an int64 array of shape ``(num_chunks,)``.
    Raises ValueError if ``numel < 0`` or ``num_chunks < 1``.
    """
    numel, num_chunks = int(numel), int(num_chunks)
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    if num_chunks < 1:
        raise ValueError(f"num_chunks must be >= 1, got {num_chunks}")
    base, extra = divmod(numel, num_chunks)
    sizes = np.full(num_chunks, base, dtype=np.int64)
    sizes[:extra] += 1
    return sizes


def chunk_bounds(numel: int, num_chunks: int) -> list[int]:
    """Element offsets where the chunks start, plus ``numel``: chunk k is ``[bounds[k], bounds[k + 1])``.

    Same layout and errors as :func:`chunk_sizes`; a list of ``num_chunks + 1`` Python ints.
    """
    return [0] + np.cumsum(chunk_sizes(numel, num_chunks)).tolist()


@dataclass(frozen=True)
class Schedule:
    """A collective algorithm written down as data.

    Attributes:
        collective: ``"all_reduce"``, ``"reduce_scatter"``, ``"all_gather"``, ... (torch.distributed names).
        algorithm: ``"ring"``, ...
        world_size: number of ranks N.
        num_chunks: how many chunks the message is split into (``chunk_sizes`` convention).
        steps: tuple of steps, each a tuple of :class:`Transfer`.
        inputs: for each rank, the chunks it holds valid data for at the start.
        outputs: for each rank, the chunks that form its result at the end.
        description: one line saying what the rotation is, for readers and pictures.
    """

    collective: str
    algorithm: str
    world_size: int
    num_chunks: int
    steps: tuple[tuple[Transfer, ...], ...]
    inputs: tuple[tuple[int, ...], ...]
    outputs: tuple[tuple[int, ...], ...]
    description: str = ""

    def __post_init__(self) -> None:
        n, c = self.world_size, self.num_chunks
        for s, step in enumerate(self.steps):
            for t in step:
                if not (0 <= t.src < n and 0 <= t.dst < n and 0 <= t.chunk < c) or t.src == t.dst:
                    raise ValueError(f"step {s}: invalid transfer {t} for world_size={n}, num_chunks={c}")

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def bytes_sent(self, numel: int, itemsize: int) -> np.ndarray:
        """Bytes each rank sends over the whole schedule, predicted by counting its transfers.

        Returns an int64 array of shape ``(world_size,)``; ``itemsize`` is bytes per element.
        """
        return self.bytes_per_step(numel, itemsize)[0].sum(axis=0)

    def bytes_per_step(self, numel: int, itemsize: int) -> tuple[np.ndarray, np.ndarray]:
        """Bytes sent and received by each rank at each step, from the transfers.

        Returns ``(sent, received)``, two int64 arrays of shape ``(num_steps, world_size)``.
        """
        sizes = chunk_sizes(numel, self.num_chunks) * int(itemsize)
        sent = np.zeros((self.num_steps, self.world_size), dtype=np.int64)
        received = np.zeros_like(sent)
        for s, step in enumerate(self.steps):
            for t in step:
                sent[s, t.src] += sizes[t.chunk]
                received[s, t.dst] += sizes[t.chunk]
        return sent, received


def replay(schedule: Schedule):
    """Replay a schedule symbolically: yield, before the first step and after each step, who holds what.

    Yields int64 arrays ``holds`` of shape ``(world_size, num_chunks, world_size)``:
    ``holds[r, c, k]`` is how many times rank k's original chunk c is folded into rank r's
    current copy of chunk c (0 means rank r's copy does not contain rank k's data; a value above
    1 means it was counted twice, which a correct all-reduce never does). Ranks start holding
    their own data for the chunks listed in ``schedule.inputs``. Yields ``num_steps + 1`` arrays.
    """
    n, c = schedule.world_size, schedule.num_chunks
    holds = np.zeros((n, c, n), dtype=np.int64)
    for r, chunks in enumerate(schedule.inputs):
        holds[r, list(chunks), r] = 1
    yield holds.copy()
    for step in schedule.steps:
        before = holds.copy()  # every send reads the state at the start of the step
        for t in step:
            if t.reduce:
                holds[t.dst, t.chunk] += before[t.src, t.chunk]
            else:
                holds[t.dst, t.chunk] = before[t.src, t.chunk]
        yield holds.copy()
