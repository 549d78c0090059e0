"""Runs that would not fit are refused up front with an estimate; the estimate bounds what a run allocates."""

import tracemalloc

import numpy as np
import pytest

import ringlab
from ringlab.collectives import get_schedule
from ringlab.sim.plan import clear_plans
from ringlab.sim.runner import run_collective
from ringlab.sim.memory import InsufficientMemory, available_bytes, check_fits, run_bytes


def test_available_memory_is_read_from_the_machine():
    avail = available_bytes()
    assert avail is None or avail > 2**20


def test_check_fits_names_the_estimate_and_the_limit():
    with pytest.raises(InsufficientMemory, match=r"needs about 2.00 GiB .* has 1.00 GiB available"):
        check_fits("a test run", 2 * 2**30, available=2**30)
    check_fits("a test run", 2**30, available=2**30)  # fits exactly


@pytest.mark.parametrize("collective, algorithm, n, numel", [
    ("all_reduce", "ring", 64, 100_003), ("all_reduce", "ring", 1024, 1024),
    ("all_reduce", "double_binary_tree", 16, 50_000), ("all_reduce", "direct", 8, 20_000),
    ("reduce_scatter", "recursive_halving", 12, 30_001), ("broadcast", "scatter_allgather", 9, 40_000),
])
def test_estimate_covers_the_measured_peak(collective, algorithm, n, numel):
    x = np.random.default_rng(0).standard_normal((n, numel)).astype(np.float32)
    estimate = run_bytes(get_schedule(collective, algorithm, n), numel, 4)
    clear_plans()
    tracemalloc.start()
    run_collective(collective, algorithm, x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak <= estimate <= 4 * peak + 2**20  # an upper bound, and not a wild one


def test_an_absurd_run_is_refused_before_allocating():
    huge = np.broadcast_to(np.float32(1), (200_000, 100_000))  # 80 GB as one view: nothing allocated
    with pytest.raises(InsufficientMemory, match="200000 ranks x 100000 elements"):
        ringlab.ring_allreduce(huge)


def test_verify_refuses_before_generating_inputs(monkeypatch):
    from ringlab.sim import verify as verify_module

    monkeypatch.setattr(verify_module, "check_fits",
                        lambda what, need: check_fits(what, need, available=2**20))
    with pytest.raises(InsufficientMemory, match="verify at world size 64"):
        verify_module.verify([64], input="random", numel=100_000)


def test_verify_cli_reports_a_refusal_in_one_line(capsys):
    from ringlab.commands.verify import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--world-sizes", "100000", "--input", "random", "--numel", "1000003"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_gradient_input_caps_the_world_size_with_a_reason():
    with pytest.raises(ValueError, match="one backward pass per rank"):
        ringlab.verify([8192])
