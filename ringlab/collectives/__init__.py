"""Collective algorithms as schedules (data) and their closed-form traffic.

Imports nothing else from ringlab, so every executor and calculator can build on it.
"""

from .alltoall import pairwise_all_to_all, pairwise_all_to_all_bytes
from .direct import direct_all_reduce, direct_all_reduce_bytes
from .halving_doubling import (
    rabenseifner_all_reduce,
    rabenseifner_all_reduce_bytes,
    recursive_doubling_all_gather,
    recursive_doubling_all_gather_bytes,
    recursive_doubling_all_reduce,
    recursive_doubling_all_reduce_bytes,
    recursive_halving_reduce_scatter,
    recursive_halving_reduce_scatter_bytes,
)
from .registry import ALGORITHMS, COLLECTIVES, Algorithm, algorithms_for, get_algorithm, get_schedule
from .ring import (
    ring_all_gather,
    ring_all_gather_bytes,
    ring_all_reduce,
    ring_all_reduce_bytes,
    ring_reduce_scatter,
    ring_reduce_scatter_bytes,
)
from .schedule import Schedule, Transfer, chunk_bounds, chunk_sizes, replay
from .tree import (
    binomial_broadcast,
    binomial_broadcast_bytes,
    binomial_reduce,
    binomial_reduce_bytes,
    double_binary_tree_all_reduce,
    double_binary_tree_all_reduce_bytes,
    double_binary_tree_parents,
    reduce_broadcast_all_reduce,
    reduce_broadcast_all_reduce_bytes,
    reduce_scatter_gather_reduce,
    reduce_scatter_gather_reduce_bytes,
    scatter_allgather_broadcast,
    scatter_allgather_broadcast_bytes,
)

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "COLLECTIVES",
    "Schedule",
    "Transfer",
    "algorithms_for",
    "binomial_broadcast",
    "binomial_broadcast_bytes",
    "binomial_reduce",
    "binomial_reduce_bytes",
    "chunk_bounds",
    "chunk_sizes",
    "direct_all_reduce",
    "direct_all_reduce_bytes",
    "double_binary_tree_all_reduce",
    "double_binary_tree_all_reduce_bytes",
    "double_binary_tree_parents",
    "get_algorithm",
    "get_schedule",
    "pairwise_all_to_all",
    "pairwise_all_to_all_bytes",
    "rabenseifner_all_reduce",
    "rabenseifner_all_reduce_bytes",
    "recursive_doubling_all_gather",
    "recursive_doubling_all_gather_bytes",
    "recursive_doubling_all_reduce",
    "recursive_doubling_all_reduce_bytes",
    "recursive_halving_reduce_scatter",
    "recursive_halving_reduce_scatter_bytes",
    "reduce_broadcast_all_reduce",
    "reduce_broadcast_all_reduce_bytes",
    "reduce_scatter_gather_reduce",
    "reduce_scatter_gather_reduce_bytes",
    "replay",
    "ring_all_gather",
    "ring_all_gather_bytes",
    "ring_all_reduce",
    "ring_all_reduce_bytes",
    "ring_reduce_scatter",
    "ring_reduce_scatter_bytes",
    "scatter_allgather_broadcast",
    "scatter_allgather_broadcast_bytes",
]
