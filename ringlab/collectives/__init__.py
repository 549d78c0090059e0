"""Collective algorithms as schedules (data) and their closed-form traffic.

Imports nothing else from ringlab, so every executor and calculator can build on it.
"""

from .ring import (
    ring_all_gather,
    ring_all_gather_bytes,
    ring_all_reduce,
    ring_all_reduce_bytes,
    ring_reduce_scatter,
    ring_reduce_scatter_bytes,
)
from .schedule import Schedule, Transfer, chunk_sizes, replay

__all__ = [
    "Schedule",
    "Transfer",
    "chunk_sizes",
    "ring_all_gather",
    "ring_all_gather_bytes",
    "ring_all_reduce",
    "ring_all_reduce_bytes",
    "ring_reduce_scatter",
    "ring_reduce_scatter_bytes",
    "replay",
]
