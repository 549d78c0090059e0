"""In-process executors that run collective schedules on numpy arrays or torch tensors."""

from .api import CollectiveResult, Traffic, all_gather, reduce_scatter, ring_allreduce, run_schedule

__all__ = ["CollectiveResult", "Traffic", "all_gather", "reduce_scatter", "ring_allreduce", "run_schedule"]
