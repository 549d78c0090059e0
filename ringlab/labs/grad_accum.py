"""Gradient accumulation with DDP (topic 11): count the all-reduces, compare the gradients.

With ``K`` micro-batches per optimizer step, plain DDP all-reduces the gradient buckets after
*every* backward. Running forward and backward of the first ``K - 1`` micro-batches inside
``model.no_sync()`` leaves their gradients local; the last backward all-reduces the
accumulated sum once. Scaling each micro-batch loss by ``1/K`` makes the result equal to the
gradient of the mean loss over the whole batch (all ranks, all micro-batches, equal sizes).

DDP decides at *forward* time whether the next backward synchronises (the forward calls
``reducer.prepare_for_backward`` only when ``require_backward_grad_sync`` is set; see
``torch/nn/parallel/distributed.py``). Measured here with torch 2.13 CPU, gloo, 2 ranks
(:func:`measure` measures again): a forward outside ``no_sync()`` followed by a backward inside
it still all-reduces, so that loop costs ``K`` all-reduce rounds per step like the plain one.
Both wrong loops still give the right gradients (an all-reduce is linear, so averaging K times
along the way sums to the same average); what they waste is communication.

All-reduces are counted with a DDP communication hook (``register_comm_hook``) that records each
bucket it is handed and then runs the default all-reduce hook. One *round* is one pass over all
buckets (the hook sees ``bucket.is_last()`` once per round). DDP builds its first round with a
single bucket and rebuilds the buckets after it, so calls per round can change after step 1.
Importing this module does not import torch (``pip install 'ringlab[torch]'``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ringlab.dist import launch
from ringlab.optional import require_torch
from ringlab.sim.gradients import seeded_parameters_

LOOPS = ("every_backward", "no_sync", "forward_outside_no_sync")
IN_FEATURES, HIDDEN, OUT_FEATURES = 8, 16, 4
# bucket_cap_mb values: one bucket for this model, and one parameter per bucket (after the rebuild)
BUCKET_LAYOUTS = {"one bucket": 25.0, "one bucket per parameter": 1e-6}


def make_model(seed: int = 0):
    """The small MLP of this lab: Linear(8, 16) -> Tanh -> Linear(16, 4), float32, weights from ``seed``
    (numpy's generator through :func:`ringlab.sim.gradients.seeded_parameters_`: the same on every machine)."""
    torch, _ = require_torch(__name__)
    model = torch.nn.Sequential(torch.nn.Linear(IN_FEATURES, HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(HIDDEN, OUT_FEATURES))
    seeded_parameters_(model, seed)
    return model


def make_batches(seed: int, world_size: int, k: int, micro_batch: int = 3):
    """``(x, y)``: float32 tensors of shapes ``(world_size, k, micro_batch, 8)`` and ``(..., 4)``.

    ``x[r, i]`` is micro-batch ``i`` of rank ``r``; the full batch is all of them together. Standard
    normal values from numpy ``default_rng(seed)`` (``torch.randn`` gives different values under
    different CPU kernels).
    """
    torch, _ = require_torch(__name__)
    rng = np.random.default_rng(seed)
    return (torch.from_numpy(rng.standard_normal((world_size, k, micro_batch, IN_FEATURES), dtype=np.float32)),
            torch.from_numpy(rng.standard_normal((world_size, k, micro_batch, OUT_FEATURES), dtype=np.float32)))


def mse(output, target):
    """Mean squared error over all elements (``torch.nn.functional.mse_loss``)."""
    return require_torch(__name__)[0].nn.functional.mse_loss(output, target)


def flat_grad(model):
    """All parameter gradients concatenated in ``parameters()`` order (float32, 1-D)."""
    torch, _ = require_torch(__name__)
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def full_batch_gradient(model, x, y, loss_fn: Callable = mse):
    """Gradient of ``loss_fn`` over the whole batch in one process: the reference DDP must match.

    ``x``, ``y``: shaped as :func:`make_batches` returns them. Leaves the gradient in ``model``
    (zeroed first) and returns it flattened (see :func:`flat_grad`).
    """
    model.zero_grad(set_to_none=True)
    loss_fn(model(x.reshape(-1, x.shape[-1])), y.reshape(-1, y.shape[-1])).backward()
    return flat_grad(model)


def accumulate(ddp_model, micro_batches: Sequence, loop: str, loss_fn: Callable = mse) -> None:
    """Forward and backward over ``micro_batches`` (a list of ``(x, y)``), the way ``loop`` says.

    ``loop`` is one of :data:`LOOPS`: ``every_backward`` (no ``no_sync``: an all-reduce round per
    backward), ``no_sync`` (the right loop: forward and backward of the first K-1 inside
    ``no_sync()``), ``forward_outside_no_sync`` (forward outside, backward inside: the subtle
    mistake). Every loss is scaled by 1/K. Leaves gradients in ``.grad``; does not step.
    Raises ValueError for an unknown loop, an empty ``micro_batches``, or a ``no_sync`` loop on a
    ``DDP(static_graph=True)`` model: DDP's static graph records which parameters reduce in the first
    iteration and does not support skipping the reduction (torch fails inside with an internal assert).
    """
    if loop not in LOOPS:
        raise ValueError(f"loop={loop!r}; accepted: {', '.join(LOOPS)}")
    k = len(micro_batches)
    if k == 0:
        raise ValueError("micro_batches is empty")
    if k > 1 and loop != "every_backward" and getattr(ddp_model, "static_graph", False):
        raise ValueError(f"loop={loop!r} needs DDP(..., static_graph=False): a static graph does not support "
                         "no_sync() gradient accumulation (torch stops with an internal assert); build DDP "
                         "without static_graph, or use loop='every_backward'")
    for i, (x, y) in enumerate(micro_batches):
        local = i < k - 1 and loop != "every_backward"
        if loop == "no_sync" and local:
            with ddp_model.no_sync():
                (loss_fn(ddp_model(x), y) / k).backward()
        elif local:  # forward_outside_no_sync
            output = ddp_model(x)
            with ddp_model.no_sync():
                (loss_fn(output, y) / k).backward()
        else:
            (loss_fn(ddp_model(x), y) / k).backward()


class AllReduceCounter:
    """DDP communication hook that counts what it all-reduces, then all-reduces as DDP would.

    ``calls`` lists ``(bucket index, bucket.is_last())`` per hook call; :meth:`reset` clears it.
    Install with :meth:`install` (once per DDP model, before its first backward).
    """

    def __init__(self):
        self.calls: list[tuple[int, bool]] = []

    @classmethod
    def install(cls, ddp_model, group=None) -> AllReduceCounter:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        counter = cls()

        def hook(state, bucket):
            counter.calls.append((bucket.index(), bucket.is_last()))
            return default_hooks.allreduce_hook(group, bucket)

        ddp_model.register_comm_hook(None, hook)
        return counter

    @property
    def rounds(self) -> int:
        """Passes over all buckets: each ends with the last bucket."""
        return sum(last for _, last in self.calls)

    def reset(self) -> None:
        self.calls.clear()


class GradientsOutOfSyncError(RuntimeError):
    """Ranks hold different gradients after a step; ``checksums`` has one row per rank."""


def check_grads_in_sync(model, group=None, atol: float = 0.0):
    """Check that every rank of ``group`` holds the same gradients; usable in any training loop.

    Each rank computes, per parameter with a gradient, the float64 sum and sum of squares of
    ``.grad`` (a parameter without ``.grad`` contributes NaN), all-gathers these checksums
    (``2 x parameters`` floats per rank, on the gradients' device: works with gloo and nccl)
    and compares them. DDP's all-reduce gives every rank the same bits, so the default
    ``atol=0`` asks for exact equality.

    Returns the checksums, a float64 tensor of shape ``(world_size, 2 * n_parameters)``, on CPU.
    Raises GradientsOutOfSyncError naming the ranks and the first parameter (by name) that differ
    from rank 0's, and ValueError for a negative ``atol``. Every rank must call it (a collective).
    """
    torch, dist = require_torch(__name__)
    if atol < 0:
        raise ValueError(f"atol must be >= 0, got {atol!r}")
    named = list(model.named_parameters())
    device = next((p.grad.device for _, p in named if p.grad is not None), torch.device("cpu"))
    rows = []
    for _, p in named:
        if p.grad is None:
            rows += [float("nan"), float("nan")]
        else:
            g = p.grad.detach().to(torch.float64)
            rows += [g.sum().item(), (g * g).sum().item()]
    mine = torch.tensor(rows, dtype=torch.float64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(gathered, mine, group=group)
    table = torch.stack(gathered).cpu()
    bad = ~torch.isclose(table, table[0:1].expand_as(table), rtol=0.0, atol=atol, equal_nan=True)
    if bad.any():
        ranks = sorted({int(r) for r in bad.any(dim=1).nonzero().flatten()})
        column = int(bad.any(dim=0).nonzero()[0])
        name = named[column // 2][0]
        raise GradientsOutOfSyncError(f"gradients differ from rank 0's on ranks {ranks}: first at parameter "
                                      f"{name!r} ({'sum' if column % 2 == 0 else 'sum of squares'} "
                                      f"{table[ranks[0], column].item()!r} vs {table[0, column].item()!r})")
    return table


@dataclass(frozen=True)
class LoopReport:
    """What one loop did over ``steps`` optimizer steps on rank 0 (all ranks are checked to agree).

    Attributes:
        loop: one of :data:`LOOPS`. k: micro-batches per step. layout: key of :data:`BUCKET_LAYOUTS`.
        calls_per_step: hook calls (bucket all-reduces) per step.
        rounds_per_step: all-reduce rounds (passes over all buckets) per step.
        ranks_in_sync: :func:`check_grads_in_sync` passed after every step.
        max_abs_diff: largest ``|DDP gradient - full-batch gradient|`` over steps and elements.
    """

    loop: str
    k: int
    layout: str
    calls_per_step: tuple[int, ...]
    rounds_per_step: tuple[int, ...]
    ranks_in_sync: bool
    max_abs_diff: float


def _rank_measure(loops, k, layouts, steps, seed) -> list[LoopReport]:
    torch, dist = require_torch(__name__)
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world_size = dist.get_rank(), dist.get_world_size()
    reports = []
    for layout in layouts:
        for loop in loops:
            ddp = DDP(make_model(seed), bucket_cap_mb=BUCKET_LAYOUTS[layout])
            reference = make_model(seed)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
            ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
            counter = AllReduceCounter.install(ddp)
            calls, rounds, in_sync, worst = [], [], True, 0.0
            for step in range(steps):
                x, y = make_batches(seed + 1 + step, world_size, k)
                counter.reset()
                opt.zero_grad(set_to_none=True)
                accumulate(ddp, list(zip(x[rank], y[rank])), loop)
                calls.append(len(counter.calls))
                rounds.append(counter.rounds)
                try:
                    check_grads_in_sync(ddp.module)
                except GradientsOutOfSyncError:
                    in_sync = False
                expected = full_batch_gradient(reference, x, y)
                worst = max(worst, (flat_grad(ddp.module) - expected).abs().max().item())
                opt.step()
                ref_opt.step()
            reports.append(LoopReport(loop, k, layout, tuple(calls), tuple(rounds), in_sync, worst))
    return reports


def measure(loops: Sequence[str] = LOOPS, k: int = 4, layouts: Sequence[str] = tuple(BUCKET_LAYOUTS),
            steps: int = 2, world_size: int = 2, seed: int = 0, timeout: float = 120.0) -> list[LoopReport]:
    """Train :func:`make_model` with DDP on ``world_size`` gloo processes, once per (layout, loop).

    Each step feeds ``k`` micro-batches of 3 samples per rank (:func:`make_batches`), counts the
    all-reduces with :class:`AllReduceCounter`, checks the ranks agree, compares with
    :func:`full_batch_gradient` of a single-process copy that takes the same SGD steps (lr 0.1)
    on the whole batch, then steps. Returns one :class:`LoopReport` per (layout, loop), from rank 0.
    Raises ValueError for unknown loops or layouts, ``k < 1`` or ``steps < 1``; errors of
    :func:`ringlab.dist.launch` propagate (``timeout`` seconds for the whole run).
    """
    for loop in loops:
        if loop not in LOOPS:
            raise ValueError(f"loop={loop!r}; accepted: {', '.join(LOOPS)}")
    for layout in layouts:
        if layout not in BUCKET_LAYOUTS:
            raise ValueError(f"layout={layout!r}; accepted: {', '.join(BUCKET_LAYOUTS)}")
    if k < 1 or steps < 1:
        raise ValueError(f"k and steps must be >= 1, got k={k!r}, steps={steps!r}")
    per_rank = launch(_rank_measure, world_size, timeout=timeout, args=(tuple(loops), k, tuple(layouts), steps, seed),
                      threads=1)
    return per_rank[0]


def report_table(reports: Sequence[LoopReport], atol: float = 1e-6) -> str:
    """Text table of :func:`measure`'s reports; gradients "match" when max |diff| <= ``atol``."""
    lines = [f"{'loop':<24} {'layout':<25} {'K':>2} {'calls/step':>11} {'rounds/step':>12} {'ranks agree':>12} "
             f"{'= full batch':>13}"]
    for r in reports:
        lines.append(f"{r.loop:<24} {r.layout:<25} {r.k:>2} {','.join(map(str, r.calls_per_step)):>11} "
                     f"{','.join(map(str, r.rounds_per_step)):>12} {str(r.ranks_in_sync):>12} "
                     f"{str(r.max_abs_diff <= atol):>13}")
    return "\n".join(lines)
