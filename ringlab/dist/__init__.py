"""Ring collectives over real processes with torch.distributed, a local launcher, and a bandwidth benchmark.

The functions here run the same :class:`~ringlab.collectives.Schedule` objects the simulator
runs, one process per rank (gloo on CPU, nccl on GPU, ``torchrun`` across machines). Importing
this package does not import torch; calling its functions does (``pip install 'ringlab[torch]'``).
Runners start with ``run_``; their old names (``ring_all_reduce`` ...) remain as aliases (:data:`OLD_NAMES`).
"""

from .executor import (
    OLD_NAMES,
    RankResult,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
    run_ring_all_gather,
    run_ring_all_reduce,
    run_ring_reduce_scatter,
    run_schedule,
)
from .launch import LaunchInterrupted, LaunchTimeout, RankError, launch, max_local_ranks

__all__ = [
    "LaunchInterrupted",
    "LaunchTimeout",
    "OLD_NAMES",
    "RankError",
    "RankResult",
    "launch",
    "max_local_ranks",
    "run_ring_all_gather",
    "run_ring_all_reduce",
    "run_ring_reduce_scatter",
    "run_schedule",
    # OLD_NAMES: aliases of the run_ names
    "ring_all_gather",
    "ring_all_reduce",
    "ring_reduce_scatter",
]
