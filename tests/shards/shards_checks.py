"""Checks shared by topic 19's tests: what a download folder must hold."""

from __future__ import annotations

import hashlib
import os

from ringlab.shards import INDEX_NAME


def file_sha256(path) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def assert_complete(dest, checkpoint) -> None:
    """DEST holds exactly the index and every shard, byte for byte the source's: nothing else."""
    assert sorted(os.listdir(dest)) == sorted([INDEX_NAME, *checkpoint.files])
    for name in checkpoint.files:
        assert file_sha256(os.path.join(dest, name)) == file_sha256(os.path.join(checkpoint.folder, name)), name


def assert_no_partial(dest, checkpoint) -> None:
    """No .part or temporary file, and every file at a final path is complete and correct."""
    if not os.path.isdir(dest):
        return
    for name in os.listdir(dest):
        assert name == INDEX_NAME or name in checkpoint.files, f"stray file {name!r} in {dest}"
        if name in checkpoint.files:
            assert file_sha256(os.path.join(dest, name)) == file_sha256(os.path.join(checkpoint.folder, name)), name
