"""In-process executors that run collective schedules on arrays (numpy)."""

from .api import CollectiveResult, Traffic, all_gather, reduce_scatter, ring_allreduce, run_schedule

__all__ = ["CollectiveResult", "Traffic", "all_gather", "reduce_scatter", "ring_allreduce", "run_schedule"]
