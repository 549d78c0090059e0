"""The Python API refuses what the CLI refuses: non-integer world sizes, non-bool flags, non-finite links."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ringlab.calc import grad_comm_bytes
from ringlab.collectives.cost import Link, alpha_beta_time, bus_factor, cost_table, crossover, linear_cost
from ringlab.sim.verify import MAX_WORLD_SIZES_LISTED, verify


@pytest.mark.parametrize("sizes", [[2.5], [2, 3.5], [True], ["4"], [None]])
def test_verify_refuses_non_integer_world_sizes(sizes):
    with pytest.raises(TypeError, match="world_sizes entry must be an integer"):
        verify(sizes, input="random", numel=4)


def test_verify_refuses_absurd_lists_and_accepts_whole_numbers():
    with pytest.raises(TypeError, match="list of integers"):
        verify("1-4", input="random")
    with pytest.raises(ValueError, match=f"at most {MAX_WORLD_SIZES_LISTED:,}"):
        verify(range(1, 10**10), input="random", numel=1)
    with pytest.raises(ValueError, match="numel"):
        verify([2], input="random", numel=-1)
    with pytest.raises(TypeError, match="numel"):
        verify([2], input="random", numel=2.5)
    report = verify([np.int64(2), 3.0], input="random", numel=5)
    assert report.ok and [r.world_size for r in report.rows] == [2, 3]


@pytest.mark.parametrize("flag", ["no", "False", 0, 1, None])
def test_grad_comm_bytes_flags_must_be_bools(flag):
    with pytest.raises(TypeError, match="no_sync must be True or False"):
        grad_comm_bytes("ddp", 7e9, 8, grad_accum_steps=4, no_sync=flag)
    with pytest.raises(TypeError, match="reshard_after_forward must be True or False"):
        grad_comm_bytes("fsdp_full_shard", 7e9, 8, reshard_after_forward=flag if flag is not None else "yes")


def test_grad_comm_bytes_no_sync_changes_ddp_traffic_by_k():
    synced = grad_comm_bytes("ddp", 7e9, 8, grad_accum_steps=4, no_sync=True).bytes_sent_per_rank
    every = grad_comm_bytes("ddp", 7e9, 8, grad_accum_steps=4, no_sync=False).bytes_sent_per_rank
    assert every == 4 * synced  # one ring all-reduce per micro-batch instead of per step


@pytest.mark.parametrize("world_size", [2.5, "8", True, 0])
def test_cost_model_refuses_bad_world_sizes(world_size):
    for call in (lambda: cost_table("all_reduce", world_size, 1024, "nvlink4"), lambda: bus_factor("all_reduce", world_size),
                 lambda: linear_cost("all_reduce", "ring", world_size, "nvlink4"),
                 lambda: crossover("all_reduce", "nvlink4", world_size)):
        with pytest.raises((TypeError, ValueError), match="world_size"):
            call()


@pytest.mark.parametrize("alpha, bandwidth", [(math.inf, 1e9), (math.nan, 1e9), (1e-6, math.inf), (1e-6, math.nan),
                                              (-1e-6, 1e9), (1e-6, 0.0)])
def test_links_must_be_finite(alpha, bandwidth):
    with pytest.raises(ValueError, match="finite bandwidth > 0 B/s and alpha >= 0 s"):
        Link("custom", alpha, bandwidth)


@pytest.mark.parametrize("gamma", [-1e-12, math.nan, math.inf, "0"])
def test_gamma_must_be_finite_and_non_negative(gamma):
    with pytest.raises(ValueError, match="gamma"):
        alpha_beta_time("all_reduce", "ring", 8, 1024, "nvlink4", gamma)
