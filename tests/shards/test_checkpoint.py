"""The checkpoint writer against the safetensors reader and numpy's generator, and the index checks."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from ringlab.shards import INDEX_NAME, read_index, sha256_file, shard_files, shard_name, write_checkpoint


def test_shards_hold_the_seeded_tensors_and_the_index_maps_them(tmp_path):
    ckpt = write_checkpoint(tmp_path, shards=3, shard_size=8192, seed=4)
    rng = np.random.default_rng(4)  # the same draws, in the same order: one (rows, 256) weight per shard
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    total = 0
    for k, name in enumerate(ckpt.files, start=1):
        assert name == f"model-{k:05d}-of-00003.safetensors"
        tensors = load_file(tmp_path / name)
        weight = tensors[f"model.layers.{k - 1}.mlp.down_proj.weight"]
        norm = tensors[f"model.layers.{k - 1}.input_layernorm.weight"]
        assert weight.shape == ((8192 - 1024) // 1024, 256) and weight.dtype == np.float32 and norm.shape == (256,)
        np.testing.assert_array_equal(weight, rng.standard_normal(weight.shape, dtype=np.float32))
        assert weight.nbytes + norm.nbytes == 8192
        assert {index["weight_map"][t] for t in tensors} == {name}
        total += sum(t.nbytes for t in tensors.values())
        assert ckpt.sha256[name] == hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
    assert index["metadata"]["total_size"] == total == ckpt.total_size == 3 * 8192
    assert ckpt.total_bytes == sum((tmp_path / n).stat().st_size for n in ckpt.files)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = write_checkpoint(tmp_path / "a", shards=2, shard_size=4096, seed=1)
    b = write_checkpoint(tmp_path / "b", shards=2, shard_size=4096, seed=1)
    c = write_checkpoint(tmp_path / "c", shards=2, shard_size=4096, seed=2)
    assert a.sha256.values() and list(a.sha256.values()) == list(b.sha256.values()) != list(c.sha256.values())
    assert not list(tmp_path.glob("*/.*"))  # no temporary file left behind


def test_odd_sizes_give_one_flat_tensor(tmp_path):
    ckpt = write_checkpoint(tmp_path, shards=1, shard_size=12, seed=0)
    (tensor,) = load_file(tmp_path / ckpt.files[0]).values()
    assert tensor.shape == (3,)


@pytest.mark.parametrize("kwargs", [dict(shards=0, shard_size=4), dict(shards=1, shard_size=6),
                                    dict(shards=True, shard_size=4), dict(shards=1, shard_size=0)])
def test_bad_arguments(kwargs, tmp_path):
    with pytest.raises(ValueError):
        write_checkpoint(tmp_path, **kwargs)


def test_shard_name_follows_transformers():
    assert shard_name(1, 4) == "model-00001-of-00004.safetensors"
    with pytest.raises(ValueError):
        shard_name(5, 4)


@pytest.mark.parametrize("name", ["../evil.safetensors", "/etc/passwd", "a/b.safetensors", ".hidden", "", "a\nb",
                                  "x" * 300, 7, None, "\ud800.safetensors", "a\udfffb"])  # lone surrogates
def test_an_index_naming_a_path_outside_the_folder_is_refused(name):
    with pytest.raises(ValueError, match="plain file name"):
        read_index(json.dumps({"weight_map": {"w": name}}).encode())


def test_more_shards_than_max_shards_is_not_a_checkpoint():
    from ringlab.shards.checkpoint import MAX_SHARDS

    index = {"weight_map": {f"t{i}": f"f{i}.safetensors" for i in range(MAX_SHARDS)}}
    assert len(shard_files(index)) == MAX_SHARDS
    index["weight_map"]["one more"] = "extra.safetensors"
    with pytest.raises(ValueError, match=f"at most {MAX_SHARDS:,}"):
        shard_files(index)
    with pytest.raises(ValueError, match="shards must be"):
        write_checkpoint("unused", shards=MAX_SHARDS + 1, shard_size=4)


@pytest.mark.parametrize("data", [b"not json", b"[]", b"{}", b'{"weight_map": {}}', b"\xff\xfe",
                                  b'{"weight_map": {"w": "a.safetensors"}, "metadata": {"total_size": -1}}'])
def test_malformed_indexes_are_refused(data):
    with pytest.raises(ValueError):
        read_index(data)


def test_the_fixture_checkpoint_reads(tmp_path):
    """tests/fixtures/shards/tiny: what `ringlab shards write --shards 2 --shard-size 2KiB --seed 0` writes."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "fixtures" / "shards" / "tiny"
    index = read_index(folder / INDEX_NAME)
    assert shard_files(index) == [shard_name(1, 2), shard_name(2, 2)]
    again = write_checkpoint(tmp_path, shards=2, shard_size=2048, seed=0)
    assert all(sha256_file(folder / n) == again.sha256[n] for n in again.files)
