"""Real gradients to reduce: a small transformer block trained on per-rank data shards.

Each rank runs forward and backward on its own deterministic shard and flattens its
gradients into one contiguous bucket, as DDP does before its all-reduce. Averaging the
buckets over ranks must give the gradient of the full batch computed in one process,
because every rank's loss is the mean over an equal-sized shard.

Needs torch (``pip install 'ringlab[torch]'``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError("real-gradient input needs torch: pip install 'ringlab[torch]'") from exc
    return torch


@dataclass(frozen=True)
class GradientBuckets:
    """Per-rank gradient buckets and the single-process full-batch gradient.

    Attributes:
        grads: float32 ``(world_size, num_params)``: rank r's flattened gradients.
        full_batch: float32 ``(num_params,)``: gradient of the mean loss over all shards.
        num_params: parameters in the model (elements per bucket).
        model: one-line description of the model.
    """

    grads: np.ndarray
    full_batch: np.ndarray
    num_params: int
    model: str


D_MODEL, N_HEAD, D_FF, SEQ_LEN = 64, 4, 128, 8


def _model(torch, seed: int):
    torch.manual_seed(seed)
    block = torch.nn.TransformerEncoderLayer(D_MODEL, N_HEAD, D_FF, dropout=0.0, batch_first=True)
    return torch.nn.Sequential(block, torch.nn.Flatten(), torch.nn.Linear(D_MODEL * SEQ_LEN, 1))


def _flat_grad(torch, model, inputs, targets) -> np.ndarray:
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy().copy()


def shard_gradients(world_sizes, per_rank_batch: int = 4, seed: int = 0) -> dict[int, GradientBuckets]:
    """Gradient buckets of a 1-layer transformer encoder block (d_model 64, 4 heads, FFN 128, seq 8) + linear head.

    ``world_sizes`` is an int or a sequence of ints. With N ranks, rank r trains on examples
    ``[r * per_rank_batch, (r + 1) * per_rank_batch)`` of one deterministic dataset (inputs from
    numpy ``default_rng([seed, 0])``, targets from ``default_rng([seed, 1])``; parameters from
    ``torch.manual_seed(seed)``). Example k is the same whatever the largest world size asked
    for, so ``shard_gradients([3])`` equals the N=3 part of ``shard_gradients([3, 8])``; each
    world size gets its own full-batch gradient.

    Returns ``{world_size: GradientBuckets}``.
    Raises ValueError for a world size or ``per_rank_batch`` below 1; ImportError without torch.
    """
    sizes = sorted({int(n) for n in np.atleast_1d(world_sizes)})
    if not sizes or sizes[0] < 1:
        raise ValueError(f"world_sizes must be integers >= 1, got {world_sizes!r}")
    if per_rank_batch < 1:
        raise ValueError(f"per_rank_batch must be >= 1, got {per_rank_batch}")
    torch = _torch()
    model = _model(torch, seed)
    total = sizes[-1] * per_rank_batch
    # separate streams for inputs and targets, so the first k examples never depend on ``total``
    inputs = torch.from_numpy(
        np.random.default_rng([seed, 0]).standard_normal((total, SEQ_LEN, D_MODEL)).astype(np.float32))
    targets = torch.from_numpy(np.random.default_rng([seed, 1]).standard_normal((total, 1)).astype(np.float32))

    def shard(lo: int, hi: int) -> np.ndarray:
        return _flat_grad(torch, model, inputs[lo:hi], targets[lo:hi])

    grads = np.stack([shard(r * per_rank_batch, (r + 1) * per_rank_batch) for r in range(sizes[-1])])
    desc = f"TransformerEncoderLayer(d_model={D_MODEL}, nhead={N_HEAD}, ffn={D_FF}) + Linear, seq {SEQ_LEN}"
    return {n: GradientBuckets(grads[:n], shard(0, n * per_rank_batch), int(grads.shape[1]), desc) for n in sizes}
