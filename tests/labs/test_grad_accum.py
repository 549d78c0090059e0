"""Gradient accumulation with DDP on 2 real gloo processes (one launch; DDP's import of torch._dynamo
makes start-up ~10 s on 2 cores), plus the in-sync checker on a deliberately diverged rank."""

import pytest

from ringlab.labs.grad_accum import LOOPS, measure

pytestmark = pytest.mark.slow  # DDP in real processes: seconds each

torch = pytest.importorskip("torch")
K = 4


@pytest.fixture(scope="module")
def reports():
    return {(r.loop, r.layout): r for r in measure(LOOPS, k=K, steps=2, world_size=2, timeout=120)}


@pytest.mark.parametrize("layout", ["one bucket", "one bucket per parameter"])
def test_no_sync_loop_all_reduces_once_per_step_and_matches_the_full_batch(reports, layout):
    r = reports[("no_sync", layout)]
    assert r.rounds_per_step == (1, 1)
    # DDP's first round uses one bucket, then rebuilds: 4 parameters -> 4 buckets with a tiny cap
    assert r.calls_per_step == ((1, 1) if layout == "one bucket" else (1, 4))
    assert r.ranks_in_sync
    assert r.max_abs_diff <= 1e-6  # float32 tolerance on O(0.1) gradients


@pytest.mark.parametrize("loop", ["every_backward", "forward_outside_no_sync"])
@pytest.mark.parametrize("layout", ["one bucket", "one bucket per parameter"])
def test_wrong_loops_all_reduce_k_times_yet_gradients_still_match(reports, loop, layout):
    r = reports[(loop, layout)]
    assert r.rounds_per_step == (K, K)
    assert r.calls_per_step == ((K, K) if layout == "one bucket" else (1 + 4 * (K - 1), 4 * K))
    assert r.ranks_in_sync and r.max_abs_diff <= 1e-6


def _diverged(rank_offset):
    import torch.distributed as dist

    from ringlab.labs.grad_accum import GradientsOutOfSyncError, check_grads_in_sync, make_model

    model = make_model(0)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    ok = check_grads_in_sync(model).shape
    if dist.get_rank() == 1:
        model[2].bias.grad[0] += rank_offset
    try:
        check_grads_in_sync(model)
    except GradientsOutOfSyncError as exc:
        return tuple(ok), str(exc)
    return tuple(ok), ""


def test_check_grads_in_sync_names_the_rank_and_parameter(checks):
    for (shape, message), _ in checks:
        assert shape == (2, 8)  # 4 parameters x (sum, sum of squares)
        assert "ranks [1]" in message and "'2.bias'" in message


def test_measure_rejects_bad_arguments():
    with pytest.raises(ValueError, match="loop"):
        measure(["no_sync_please"])
    with pytest.raises(ValueError, match="layout"):
        measure(layouts=["three buckets"])
    with pytest.raises(ValueError, match="k and steps"):
        measure(k=0)


def _static_graph_no_sync(seed):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ringlab.labs.grad_accum import accumulate, make_batches, make_model

    ddp = DDP(make_model(seed), static_graph=True)
    x, y = make_batches(seed, dist.get_world_size(), 3)
    rank = dist.get_rank()
    try:
        accumulate(ddp, list(zip(x[rank], y[rank])), "no_sync")
    except ValueError as exc:
        refused = str(exc)
    else:
        refused = None
    accumulate(ddp, list(zip(x[rank], y[rank])), "every_backward")  # still fine without no_sync
    return refused


def _diverged_then_static_graph(rank_offset, seed):
    """Both ranks' ``(_diverged(rank_offset), _static_graph_no_sync(seed))``: the two need their own models only,
    so they share one launch (start-up, DDP's import of torch._dynamo included, once instead of twice)."""
    return _diverged(rank_offset), _static_graph_no_sync(seed)


@pytest.fixture(scope="module")
def checks():
    from ringlab.dist import launch

    return launch(_diverged_then_static_graph, 2, timeout=120, args=(0.5, 0), threads=1)


def test_static_graph_with_no_sync_is_refused_with_a_reason(checks):
    """torch's DDP(static_graph=True) cannot skip reductions: the lab says so instead of an internal assert."""
    for _, message in checks:
        assert message is not None and "static_graph" in message and "every_backward" in message
