"""Collective names: nccl-tests binaries and rccl-tests JSON names mapped to torch.distributed's spelling."""

from __future__ import annotations

_NAMES = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather", "allgather": "all_gather",
          "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter", "broadcast": "broadcast",
          "reduce": "reduce", "alltoall": "all_to_all", "all_to_all": "all_to_all", "alltoallv": "all_to_allv",
          "sendrecv": "sendrecv", "gather": "gather", "scatter": "scatter", "hypercube": "hypercube"}


def collective_name(name: str) -> str:
    """``all_reduce_perf`` / ``all_reduce_perf_mpi`` / ``AllReduce`` -> ``all_reduce``; unknown names lower-cased."""
    key = name.lower().removesuffix("_mpi").removesuffix("_perf").replace("-", "_")
    return _NAMES.get(key, _NAMES.get(key.replace("_", ""), key))
