"""Downloading a sharded checkpoint: a fault-injecting local server and the reference async fetcher (topic 19).

* :mod:`ringlab.shards.checkpoint`: write and read a Hugging Face-style sharded safetensors checkpoint.
* :mod:`ringlab.shards.faults`: the fault SPEC grammar (latency, throttle, stall, reset, truncate, corrupt,
  status codes; per-connection, link and busy caps).
* :mod:`ringlab.shards.server`: :class:`ShardServer`, serving a checkpoint on 127.0.0.1 with faults and
  recording connections and requests (:mod:`ringlab.shards.records`).
* :mod:`ringlab.shards.fetch`: the reference downloader (asyncio + httpx + tqdm; the ``shards`` extra),
  imported on its own so that this package needs only the standard library and numpy.
"""

from ringlab.shards.checkpoint import (INDEX_NAME, Checkpoint, read_index, sha256_file, shard_files, shard_name,
                                      write_checkpoint)
from ringlab.shards.faults import Fault, FaultPlan, parse_faults
from ringlab.shards.records import ConnectionRecord, RequestRecord, ServerRecords
from ringlab.shards.server import ShardServer

__all__ = ["INDEX_NAME", "Checkpoint", "ConnectionRecord", "Fault", "FaultPlan", "RequestRecord", "ServerRecords",
           "ShardServer", "parse_faults", "read_index", "sha256_file", "shard_files", "shard_name", "write_checkpoint"]
