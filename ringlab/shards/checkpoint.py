"""A small, real, Hugging Face-style sharded checkpoint: written, read and checked.

The layout is the one ``transformers`` writes with ``save_pretrained(..., max_shard_size=...)`` and the Hub
serves: ``model.safetensors.index.json`` holds ``{"metadata": {"total_size": N}, "weight_map": {tensor name:
shard file}}`` and the shards are ``model-00001-of-00004.safetensors`` ... (the index format is defined by
``transformers.modeling_utils`` / ``huggingface_hub.serialization``; the shard file format by the
``safetensors`` package, which writes them here). ``total_size`` is the bytes of tensor data, not of files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass

import numpy as np

INDEX_NAME = "model.safetensors.index.json"
ROW = 256  # elements per row of the 2-D weights written (float32: 1 KiB a row)
MAX_INDEX_BYTES = 64 * 2**20  # an index of a 1T-parameter model is a few MB; anything larger is not one
# transformers numbers shards "-NNNNN-of-NNNNN" (five digits); real checkpoints have tens to hundreds of shards
# (Llama-3.1-405B: 191). Ten thousand is far past any; an index naming more is not a checkpoint, and a
# downloader should refuse it rather than start a task per shard (which, at 10^5, blocks the event loop for
# seconds, past any deadline).
MAX_SHARDS = 10_000


def shard_name(k: int, n: int) -> str:
    """The file name of shard ``k`` (1-based) of ``n``, as transformers writes it:
    ``model-00001-of-00004.safetensors``."""
    if not 1 <= k <= n <= 99999:
        raise ValueError(f"shard number {k} of {n}: need 1 <= k <= n <= 99999")
    return f"model-{k:05d}-of-{n:05d}.safetensors"


def sha256_file(path, chunk_size: int = 1 << 20) -> str:
    """Lowercase hex sha256 of the file at ``path``, read ``chunk_size`` bytes at a time (never whole)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Checkpoint:
    """A sharded checkpoint on disk. ``files`` in shard order; ``sizes`` in bytes (whole files) and ``sha256``
    (lowercase hex) per file name; ``total_size`` is the index's ``metadata.total_size`` (tensor bytes)."""

    folder: str
    index_path: str
    files: list[str]
    sizes: dict[str, int]
    sha256: dict[str, str]
    total_size: int

    @property
    def total_bytes(self) -> int:
        """Bytes of all shard files together: what a download moves (the index aside)."""
        return sum(self.sizes.values())


def _tensors(k: int, shard_size: int, rng) -> dict:
    """The tensors of shard ``k`` (1-based): ``shard_size`` bytes of float32 in one (rows, ROW) weight plus a
    (ROW,) norm when the size allows, else one 1-D weight."""
    elements = shard_size // 4
    layer = f"model.layers.{k - 1}"
    if elements >= 2 * ROW and (elements - ROW) % ROW == 0:
        rows = (elements - ROW) // ROW
        return {f"{layer}.mlp.down_proj.weight": rng.standard_normal((rows, ROW), dtype=np.float32),
                f"{layer}.input_layernorm.weight": np.ones(ROW, dtype=np.float32)}
    return {f"{layer}.mlp.down_proj.weight": rng.standard_normal(elements, dtype=np.float32)}


def write_checkpoint(folder, *, shards: int, shard_size: int, seed: int = 0) -> Checkpoint:
    """Write ``shards`` safetensors files of ``shard_size`` bytes of float32 tensor data each, and their index,
    into ``folder`` (created if missing); values from ``numpy.random.default_rng(seed)``, so the same
    arguments give byte-identical files.

    ``shard_size`` must be a positive multiple of 4 (whole float32 elements); each file adds the safetensors
    header (8 bytes + a JSON of about 200 bytes). Shard ``k`` holds ``model.layers.{k-1}.mlp.down_proj.weight``
    of shape ``(rows, 256)`` and ``model.layers.{k-1}.input_layernorm.weight`` of shape ``(256,)`` when the
    size is a multiple of 1 KiB and at least 2 KiB, else one 1-D tensor. Raises ValueError for bad arguments,
    ImportError (naming the ``shards`` extra) without the ``safetensors`` package, OSError if it cannot write.
    Each shard is written to a temporary name and renamed, so a crash leaves no half-written shard.
    """
    try:
        from safetensors.numpy import save_file
    except ImportError as exc:  # pragma: no cover - the extra is installed by make
        raise ImportError("writing a checkpoint needs the safetensors package: pip install -e '.[shards]'") from exc
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be a whole number from 1 to {MAX_SHARDS:,}, got {shards!r}")
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 4 or shard_size % 4:
        raise ValueError(f"shard_size must be a positive multiple of 4 bytes (float32 elements), got {shard_size!r}")
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    umask = os.umask(0)
    os.umask(umask)
    weight_map, files, sizes, sums, total = {}, [], {}, {}, 0
    for k in range(1, shards + 1):
        name = shard_name(k, shards)
        tensors = _tensors(k, shard_size, rng)
        tmp = os.path.join(folder, f".{name}.tmp")
        save_file(tensors, tmp, metadata={"format": "pt"})  # "pt": what transformers writes and expects
        os.chmod(tmp, 0o666 & ~umask)  # safetensors creates files 0600; give them the mode open() would
        os.replace(tmp, os.path.join(folder, name))
        for tensor_name, array in tensors.items():
            weight_map[tensor_name] = name
            total += array.nbytes
        files.append(name)
        sizes[name] = os.path.getsize(os.path.join(folder, name))
        sums[name] = sha256_file(os.path.join(folder, name))
    index_path = os.path.join(folder, INDEX_NAME)
    tmp = index_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, index_path)
    return Checkpoint(folder, index_path, files, sizes, sums, total)


_CONTROL = re.compile("[\x00-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # not encodable as UTF-8


def check_shard_file_name(name) -> str:
    """``name`` if it is a plain file name a download may write (no folder, no ``..``, no leading dot, no
    control characters, UTF-8 text of at most 255 bytes), else ValueError: an index from a server must not write
    outside its folder. (JSON can spell a lone surrogate, ``"\\ud800"``, which no file system name holds.)"""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith(".") \
            or _CONTROL.search(name) or _SURROGATE.search(name) or len(name.encode()) > 255:
        raise ValueError(f"weight_map names the file {str(name)[:80]!r}; a shard must be a plain file name")
    return name


def read_index(source) -> dict:
    """The parsed index from a path or from its bytes, checked: a JSON object whose ``weight_map`` maps
    tensor names to plain shard file names (:func:`check_shard_file_name`); ``metadata.total_size``, when
    present, a non-negative integer. Raises ValueError with a one-line reason, OSError if unreadable."""
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    else:
        with open(source, "rb") as fh:
            data = fh.read(MAX_INDEX_BYTES + 1)
    if len(data) > MAX_INDEX_BYTES:
        raise ValueError(f"index larger than {MAX_INDEX_BYTES:,} bytes: not a model.safetensors.index.json")
    try:
        index = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"index is not JSON ({str(exc)[:100]})") from None
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict) or not index["weight_map"]:
        raise ValueError("index has no weight_map object mapping tensor names to shard files")
    checked: set[str] = set()  # each file once: an index names the same file for many tensors
    for name in index["weight_map"].values():
        if not isinstance(name, str) or name not in checked:
            checked.add(check_shard_file_name(name))
    total = (index.get("metadata") or {}).get("total_size") if isinstance(index.get("metadata"), dict) else None
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total < 0):
        raise ValueError(f"index metadata.total_size is {total!r}; expected a whole number of bytes")
    return index


def shard_files(index: dict) -> list[str]:
    """The shard file names ``index["weight_map"]`` refers to, each once, sorted. ValueError (one line) for a
    name that is not a plain file name or for more than ``MAX_SHARDS`` files."""
    names = {check_shard_file_name(name) for name in index["weight_map"].values()}
    if len(names) > MAX_SHARDS:
        raise ValueError(f"weight_map names {len(names):,} shard files; a checkpoint has at most {MAX_SHARDS:,}")
    return sorted(names)
