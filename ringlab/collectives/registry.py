"""Every (collective, algorithm) pair: its schedule builder, closed-form bytes per rank and step count.

``ALGORITHMS[(collective, algorithm)]`` is an :class:`Algorithm`; calling it builds the schedule.
:func:`get_schedule` is the checked entry point. Names follow torch.distributed (collectives) and
NCCL / MPICH (algorithms).

Every builder is named ``<algorithm>_<collective>_schedule`` and returns data (a Schedule, nothing
runs); its closed form is the same name ending in ``_bytes``. Functions that run a collective start
with ``run_`` (``ringlab.sim.run_collective``, ``ringlab.dist.run_ring_all_reduce``), except the
public one-call API (``ringlab.ring_allreduce``, ``ringlab.reduce_scatter``, ``ringlab.all_gather``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import alltoall, direct, halving_doubling as hd, ring, tree
from .schedule import check_world_size

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all")
ROOTED = ("broadcast", "reduce")
REDUCING = ("all_reduce", "reduce_scatter", "reduce")  # the collectives that take an op


def _log2_floor(n: int) -> int:
    return n.bit_length() - 1


def _fold_steps(n: int) -> int:
    """MPICH's fold adds one step before and one after when n is not a power of two."""
    return 0 if n & (n - 1) == 0 else 2


def _log2_folded(n: int) -> int:
    return _log2_floor(n) + _fold_steps(n)


def _ceil_log2(n: int) -> int:
    return (n - 1).bit_length()


@dataclass(frozen=True)
class Algorithm:
    """One collective algorithm.

    Attributes:
        collective, name: the registry key.
        build: ``build(world_size)`` or, for broadcast/reduce, ``build(world_size, root)`` -> Schedule.
        bytes_fn: closed-form bytes sent per rank, ``(world_size, numel, itemsize[, root]) -> int64 (N,)``.
        steps_fn: closed-form step count, ``world_size -> int``.
        bit_identical: whether float results are bit-identical on every rank (all_reduce only;
            False for ``direct``, see :mod:`ringlab.collectives.direct`).
        summary: one line for tables.
    """

    collective: str
    name: str
    build: Callable
    bytes_fn: Callable
    steps_fn: Callable[[int], int]
    summary: str
    bit_identical: bool = True

    @property
    def rooted(self) -> bool:
        return self.collective in ROOTED

    @property
    def reducing(self) -> bool:
        return self.collective in REDUCING

    def __call__(self, world_size: int, root: int = 0):
        """Build the :class:`~ringlab.collectives.Schedule` (``root`` only for broadcast / reduce)."""
        return self.build(world_size, root) if self.rooted else self.build(world_size)

    def bytes_sent(self, world_size: int, numel: int, itemsize: int, root: int = 0) -> np.ndarray:
        """Closed-form bytes each rank sends, int64 ``(world_size,)``; numel is the message
        (all_gather: gathered; all_to_all: each rank's buffer)."""
        args = (world_size, numel, itemsize) + ((root,) if self.rooted else ())
        return self.bytes_fn(*args)

    def num_steps(self, world_size: int) -> int:
        """Closed-form number of communication steps."""
        return int(self.steps_fn(check_world_size(world_size)))


def _entries() -> dict[tuple[str, str], Algorithm]:
    rows = [
        Algorithm("all_reduce", "ring", ring.ring_all_reduce_schedule, ring.ring_all_reduce_bytes,
                  lambda n: 2 * (n - 1), "reduce-scatter + all-gather around a ring (Patarasuk & Yuan 2009)"),
        Algorithm("all_reduce", "recursive_doubling", hd.recursive_doubling_all_reduce_schedule,
                  hd.recursive_doubling_all_reduce_bytes, _log2_folded, "swap the whole message with i ^ 2**k"),
        Algorithm("all_reduce", "rabenseifner", hd.rabenseifner_all_reduce_schedule, hd.rabenseifner_all_reduce_bytes,
                  lambda n: 2 * _log2_floor(n) + _fold_steps(n),
                  "recursive halving reduce-scatter + recursive doubling all-gather"),
        Algorithm("all_reduce", "double_binary_tree", tree.double_binary_tree_all_reduce_schedule,
                  tree.double_binary_tree_all_reduce_bytes, tree.double_binary_tree_steps,
                  "NCCL's two complementary binary trees, half the message each"),
        Algorithm("all_reduce", "direct", direct.direct_all_reduce_schedule, direct.direct_all_reduce_bytes,
                  lambda n: int(n > 1), "everyone sends everything to everyone", bit_identical=False),
        Algorithm("all_reduce", "reduce_broadcast", tree.reduce_broadcast_all_reduce_schedule,
                  tree.reduce_broadcast_all_reduce_bytes, lambda n: 2 * _ceil_log2(n),
                  "binomial reduce to rank 0, then binomial broadcast"),
        Algorithm("reduce_scatter", "ring", ring.ring_reduce_scatter_schedule, ring.ring_reduce_scatter_bytes,
                  lambda n: n - 1, "N - 1 ring steps, rank r ends with chunk r"),
        Algorithm("reduce_scatter", "recursive_halving", hd.recursive_halving_reduce_scatter_schedule,
                  hd.recursive_halving_reduce_scatter_bytes, _log2_folded, "distance-halving pairwise exchanges"),
        Algorithm("all_gather", "ring", ring.ring_all_gather_schedule, ring.ring_all_gather_bytes,
                  lambda n: n - 1, "N - 1 ring steps forwarding one chunk"),
        Algorithm("all_gather", "recursive_doubling", hd.recursive_doubling_all_gather_schedule,
                  hd.recursive_doubling_all_gather_bytes, _log2_folded, "distance-doubling pairwise exchanges"),
        Algorithm("broadcast", "binomial_tree", tree.binomial_broadcast_schedule, tree.binomial_broadcast_bytes,
                  _ceil_log2, "whole message down a binomial tree"),
        Algorithm("broadcast", "scatter_allgather", tree.scatter_allgather_broadcast_schedule,
                  tree.scatter_allgather_broadcast_bytes, lambda n: _ceil_log2(n) + n - 1,
                  "binomial scatter + ring all-gather (van de Geijn)"),
        Algorithm("reduce", "binomial_tree", tree.binomial_reduce_schedule, tree.binomial_reduce_bytes,
                  _ceil_log2, "whole message up a binomial tree"),
        Algorithm("reduce", "reduce_scatter_gather", tree.reduce_scatter_gather_reduce_schedule,
                  tree.reduce_scatter_gather_reduce_bytes, lambda n: n - 1 + _ceil_log2(n),
                  "ring reduce-scatter + binomial gather (Rabenseifner)"),
        Algorithm("all_to_all", "pairwise", alltoall.pairwise_all_to_all_schedule, alltoall.pairwise_all_to_all_bytes,
                  lambda n: n - 1, "N - 1 pairwise exchanges, rank r -> r + k at step k"),
    ]
    return {(a.collective, a.name): a for a in rows}


ALGORITHMS: dict[tuple[str, str], Algorithm] = _entries()


def algorithms_for(collective: str) -> tuple[str, ...]:
    """Algorithm names registered for ``collective``; raises ValueError for an unknown collective."""
    check_collective(collective)
    return tuple(name for coll, name in ALGORITHMS if coll == collective)


def check_collective(collective: str, accepted: tuple[str, ...] = COLLECTIVES) -> str:
    """Return ``collective`` if it is one of ``accepted`` (default: every registered collective; a caller that
    runs fewer passes its own), else raise ValueError naming the accepted ones and close matches."""
    if collective not in accepted:
        close = difflib.get_close_matches(str(collective), accepted, n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise ValueError(f"collective must be one of {', '.join(accepted)}; got {collective!r}{hint}")
    return collective


def get_algorithm(collective: str, algorithm: str) -> Algorithm:
    """The registry entry for ``(collective, algorithm)``.

    Raises ValueError listing the valid algorithms for the collective (and every valid pair).
    """
    valid = algorithms_for(collective)
    if (collective, algorithm) not in ALGORITHMS:
        close = difflib.get_close_matches(str(algorithm), valid, n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        pairs = ", ".join(f"{c}/{a}" for c, a in ALGORITHMS)
        raise ValueError(f"algorithm for {collective} must be one of {', '.join(valid)}; got {algorithm!r}{hint}. "
                         f"Valid pairs: {pairs}")
    return ALGORITHMS[(collective, algorithm)]


def get_schedule(collective: str, algorithm: str, world_size: int, root: int = 0):
    """Build the schedule of ``(collective, algorithm)`` for ``world_size`` ranks.

    ``root`` applies to broadcast and reduce (rank 0 by default) and must be 0 otherwise.
    Raises ValueError for unknown names, bad world sizes or roots; TypeError for a non-int world size.
    """
    algo = get_algorithm(collective, algorithm)
    if not algo.rooted and root != 0:
        raise ValueError(f"root applies to broadcast and reduce only; {collective} has no root (got root={root})")
    return algo(world_size, root)
