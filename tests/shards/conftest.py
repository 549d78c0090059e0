"""Fixtures of topic 19's tests: a small checkpoint written once per session, and a server per test."""

from __future__ import annotations

import pytest

from ringlab.shards import ShardServer, write_checkpoint

SHARDS = 6
SHARD_SIZE = 256 * 1024  # bytes of tensor data per shard: big enough to be cut mid-body, small enough to be quick


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    """A 6-shard checkpoint of 256 KiB shards (seed 19)."""
    return write_checkpoint(tmp_path_factory.mktemp("ckpt"), shards=SHARDS, shard_size=SHARD_SIZE, seed=19)


@pytest.fixture
def serve(checkpoint):
    """``serve(spec, **kw)`` -> a started ShardServer on the session checkpoint, stopped after the test."""
    servers = []

    def start(spec: str = "", folder=None, **kwargs) -> ShardServer:
        server = ShardServer(folder or checkpoint.folder, spec, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
