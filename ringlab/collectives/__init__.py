"""Collective algorithms as schedules (data) and their closed-form traffic.

Imports nothing else from ringlab, so every executor and calculator can build on it.

Names say what a function returns: ``<algorithm>_<collective>_schedule(world_size)`` builds the
:class:`Schedule` (data; nothing runs), ``<algorithm>_<collective>_bytes(world_size, numel, itemsize)``
is its closed-form bytes per rank. Functions that *run* a collective say so elsewhere:
``ringlab.ring_allreduce`` / ``ringlab.sim.run_collective`` simulate one in-process and
``ringlab.dist.run_ring_all_reduce`` runs one over torch.distributed. The builders' earlier names
(``ring_all_reduce`` ...) stay as aliases, listed in :data:`OLD_NAMES`.
"""

from .alltoall import pairwise_all_to_all_schedule, pairwise_all_to_all_bytes
from .direct import direct_all_reduce_schedule, direct_all_reduce_bytes
from .halving_doubling import (
    rabenseifner_all_reduce_schedule,
    rabenseifner_all_reduce_bytes,
    recursive_doubling_all_gather_schedule,
    recursive_doubling_all_gather_bytes,
    recursive_doubling_all_reduce_schedule,
    recursive_doubling_all_reduce_bytes,
    recursive_halving_reduce_scatter_schedule,
    recursive_halving_reduce_scatter_bytes,
)
from .registry import ALGORITHMS, COLLECTIVES, Algorithm, algorithms_for, get_algorithm, get_schedule
from .ring import (
    RING_COLLECTIVES,
    ring_busiest_bytes,
    ring_all_gather_schedule,
    ring_all_gather_bytes,
    ring_all_reduce_schedule,
    ring_all_reduce_bytes,
    ring_reduce_scatter_schedule,
    ring_reduce_scatter_bytes,
)
from .schedule import (
    MAX_TABLE_CELLS,
    Holdings,
    RingPhase,
    Schedule,
    Step,
    StepBytes,
    StepList,
    Transfer,
    check_itemsize,
    check_world_size,
    chunk_bounds,
    chunk_offsets,
    chunk_sizes,
    replay,
)
from .tree import (
    binomial_broadcast_schedule,
    binomial_broadcast_bytes,
    binomial_reduce_schedule,
    binomial_reduce_bytes,
    double_binary_tree_all_reduce_schedule,
    double_binary_tree_all_reduce_bytes,
    double_binary_tree_parents,
    reduce_broadcast_all_reduce_schedule,
    reduce_broadcast_all_reduce_bytes,
    reduce_scatter_gather_reduce_schedule,
    reduce_scatter_gather_reduce_bytes,
    scatter_allgather_broadcast_schedule,
    scatter_allgather_broadcast_bytes,
)

__all__ = [
    "ALGORITHMS",
    "OLD_NAMES",
    "RING_COLLECTIVES",
    "Algorithm",
    "COLLECTIVES",
    "Holdings",
    "MAX_TABLE_CELLS",
    "RingPhase",
    "Schedule",
    "Step",
    "StepBytes",
    "StepList",
    "Transfer",
    "algorithms_for",
    "binomial_broadcast_schedule",
    "binomial_broadcast_bytes",
    "binomial_reduce_schedule",
    "binomial_reduce_bytes",
    "check_itemsize",
    "check_world_size",
    "chunk_bounds",
    "chunk_offsets",
    "chunk_sizes",
    "direct_all_reduce_schedule",
    "direct_all_reduce_bytes",
    "double_binary_tree_all_reduce_schedule",
    "double_binary_tree_all_reduce_bytes",
    "double_binary_tree_parents",
    "get_algorithm",
    "get_schedule",
    "pairwise_all_to_all_schedule",
    "pairwise_all_to_all_bytes",
    "rabenseifner_all_reduce_schedule",
    "rabenseifner_all_reduce_bytes",
    "recursive_doubling_all_gather_schedule",
    "recursive_doubling_all_gather_bytes",
    "recursive_doubling_all_reduce_schedule",
    "recursive_doubling_all_reduce_bytes",
    "recursive_halving_reduce_scatter_schedule",
    "recursive_halving_reduce_scatter_bytes",
    "reduce_broadcast_all_reduce_schedule",
    "reduce_broadcast_all_reduce_bytes",
    "reduce_scatter_gather_reduce_schedule",
    "reduce_scatter_gather_reduce_bytes",
    "replay",
    "ring_all_gather_schedule",
    "ring_all_gather_bytes",
    "ring_all_reduce_schedule",
    "ring_busiest_bytes",
    "ring_all_reduce_bytes",
    "ring_reduce_scatter_schedule",
    "ring_reduce_scatter_bytes",
    "scatter_allgather_broadcast_schedule",
    "scatter_allgather_broadcast_bytes",
]

# The builders' names before they said "schedule": the same objects, so code written against them runs.
ring_all_reduce = ring_all_reduce_schedule
ring_reduce_scatter = ring_reduce_scatter_schedule
ring_all_gather = ring_all_gather_schedule
recursive_doubling_all_reduce = recursive_doubling_all_reduce_schedule
rabenseifner_all_reduce = rabenseifner_all_reduce_schedule
recursive_halving_reduce_scatter = recursive_halving_reduce_scatter_schedule
recursive_doubling_all_gather = recursive_doubling_all_gather_schedule
binomial_broadcast = binomial_broadcast_schedule
binomial_reduce = binomial_reduce_schedule
scatter_allgather_broadcast = scatter_allgather_broadcast_schedule
reduce_scatter_gather_reduce = reduce_scatter_gather_reduce_schedule
reduce_broadcast_all_reduce = reduce_broadcast_all_reduce_schedule
double_binary_tree_all_reduce = double_binary_tree_all_reduce_schedule
direct_all_reduce = direct_all_reduce_schedule
pairwise_all_to_all = pairwise_all_to_all_schedule
OLD_NAMES = (  # each is ``<name>_schedule``
    "ring_all_reduce", "ring_reduce_scatter", "ring_all_gather", "recursive_doubling_all_reduce",
    "rabenseifner_all_reduce", "recursive_halving_reduce_scatter", "recursive_doubling_all_gather",
    "binomial_broadcast", "binomial_reduce", "scatter_allgather_broadcast", "reduce_scatter_gather_reduce",
    "reduce_broadcast_all_reduce", "double_binary_tree_all_reduce", "direct_all_reduce", "pairwise_all_to_all",
)
