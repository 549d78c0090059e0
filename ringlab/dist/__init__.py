"""Ring collectives over real processes with torch.distributed, a local launcher, and a bandwidth benchmark.

The functions here run the same :class:`~ringlab.collectives.Schedule` objects the simulator
runs, one process per rank (gloo on CPU, nccl on GPU, ``torchrun`` across machines). Importing
this package does not import torch; calling its functions does (``pip install 'ringlab[torch]'``).
"""

from .collectives import RankResult, ring_all_gather, ring_all_reduce, ring_reduce_scatter, run_schedule
from .launch import LaunchInterrupted, LaunchTimeout, RankError, launch, max_local_ranks

__all__ = [
    "LaunchInterrupted",
    "LaunchTimeout",
    "RankError",
    "RankResult",
    "launch",
    "max_local_ranks",
    "ring_all_gather",
    "ring_all_reduce",
    "ring_reduce_scatter",
    "run_schedule",
]
