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

from ringlab.optional import require_torch


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


def seeded_parameters_(module, seed) -> None:
    """Overwrite the randomly initialised parameters of the torch ``module`` from numpy ``default_rng(seed)``.

    torch's own initialisers scale uniform numbers with vectorised kernels whose rounding depends on
    the CPU (fused multiply-add under AVX2 and AVX-512, none under ``ATEN_CPU_CAPABILITY=default``),
    so one ``torch.manual_seed`` gives parameters that differ in the last bit between machines.
    numpy's generator and plain IEEE arithmetic give the same float32 values everywhere.

    In ``parameters()`` order, a parameter with two or more dimensions gets U(-b, b) with
    ``b = 1 / sqrt(fan_in)``, ``fan_in = numel / shape[0]`` (``torch.nn.Linear``'s default bound,
    ``kaiming_uniform_(a=sqrt(5))``); a 1-D parameter that torch set to all zeros or all ones
    (LayerNorm's scale and shift, attention biases) is kept, any other gets the bound of the weight
    before it (a Linear's bias, as torch does). ``seed``: anything ``numpy.random.default_rng``
    accepts. In place; returns None. Raises ValueError for a random 1-D parameter with no weight
    before it.
    """
    torch, _ = require_torch("real-gradient input")
    rng = np.random.default_rng(seed)
    bound = None
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.ndim >= 2:
                bound = 1.0 / np.sqrt(p[0].numel())
            elif bool((p == 0).all() or (p == 1).all()):
                continue
            elif bound is None:
                raise ValueError(f"parameter {name!r} is 1-D and random but follows no weight matrix")
            values = bound * (2.0 * rng.random(tuple(p.shape)) - 1.0)  # plain IEEE float64 ops: no FMA, no SIMD choice
            p.copy_(torch.from_numpy(values.astype(np.float32)))


def _model(torch, seed: int):
    block = torch.nn.TransformerEncoderLayer(D_MODEL, N_HEAD, D_FF, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(block, torch.nn.Flatten(), torch.nn.Linear(D_MODEL * SEQ_LEN, 1))
    seeded_parameters_(model, [seed, 2])
    return model


def _flat_grad(torch, model, inputs, targets) -> np.ndarray:
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy().copy()


def shard_gradients(world_sizes, per_rank_batch: int = 4, seed: int = 0) -> dict[int, GradientBuckets]:
    """Gradient buckets of a 1-layer transformer encoder block (d_model 64, 4 heads, FFN 128, seq 8) + linear head.

    ``world_sizes`` is an int or a sequence of ints. With N ranks, rank r trains on examples
    ``[r * per_rank_batch, (r + 1) * per_rank_batch)`` of one deterministic dataset (inputs from
    numpy ``default_rng([seed, 0])``, targets from ``default_rng([seed, 1])``, parameters from
    ``default_rng([seed, 2])`` through :func:`seeded_parameters_`: the same on every machine). Example k is the same whatever the largest world size asked
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
    torch, _ = require_torch("real-gradient input")
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
