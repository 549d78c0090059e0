"""verify on real gradients, the reference error bounds, and the CLI's exit codes."""

import json
import re

import ml_dtypes
import numpy as np
import pytest

from ringlab.commands.verify import main, parse_size, parse_world_sizes
from ringlab.sim import verify as verify_module
from ringlab.sim.gradients import shard_gradients
from ringlab.sim.reference import bit_identical, direct_reduce, max_error, unit_roundoff
from ringlab.sim.verify import verify


def test_gradient_buckets_average_to_the_full_batch_gradient():
    buckets = shard_gradients([1, 3, 8])
    for n, b in buckets.items():
        assert b.grads.shape == (n, b.num_params) and b.grads.dtype == np.float32
        # independent check: the mean of per-shard gradients equals the one-process gradient
        assert np.allclose(b.grads.astype(np.float64).mean(0), b.full_batch, rtol=1e-4, atol=1e-6)
    # smaller world sizes reuse the first shards of the largest, and asking for one alone gives the same data
    assert np.array_equal(buckets[3].grads, buckets[8].grads[:3])
    alone = shard_gradients([3])[3]
    assert np.array_equal(alone.grads, buckets[3].grads) and np.array_equal(alone.full_batch, buckets[3].full_batch)


def test_verify_on_gradients_passes_and_checks_the_full_batch():
    report = verify([1, 2, 5, 16], input="gradients")
    assert report.ok and report.model.startswith("TransformerEncoderLayer")
    for row in report.rows:
        assert row.full_batch_ok and row.full_batch_error < 1e-5
        assert row.bytes_match and row.bit_identical and row.steps == 2 * (row.world_size - 1)
        assert row.sent_max <= 2 * row.message_bytes


@pytest.mark.parametrize("dtype", ["bf16", "float16"])
def test_verify_on_gradients_in_low_precision(dtype):
    assert verify([2, 7], input="gradients", dtype=dtype).ok


def test_unit_roundoff_of_each_float():
    assert unit_roundoff(np.float32) == 2.0**-24
    assert unit_roundoff(np.float16) == 2.0**-11
    assert unit_roundoff(ml_dtypes.bfloat16) == 2.0**-8


def test_sum_bound_is_highams():
    x = np.array([[1.0, -2.0], [3.0, 4.0]], dtype=np.float32)
    expected, tol = direct_reduce(x, "sum")
    u = 2.0**-24
    assert expected.tolist() == [4.0, 2.0]
    assert np.allclose(tol, 2 * u / (1 - 2 * u) * np.array([4.0, 6.0]))


def test_max_error_treats_matching_overflow_as_agreement_and_flags_nan():
    got = np.array([[np.inf, 1.0]], dtype=np.float16)
    expected = np.array([70000.0, 1.0])  # overflows float16, as the ring's sum did
    assert max_error(got, expected, np.zeros(2))[1]
    assert not max_error(np.array([[np.nan, 1.0]], np.float16), np.array([2.0, 1.0]), np.zeros(2))[1]


def test_integer_comparison_is_exact():
    x = np.array([[100, 1], [100, 2], [100, 3]], dtype=np.int8)
    expected, tol = direct_reduce(x, "sum")
    assert tol is None and expected.tolist() == [44, 6]
    assert max_error(np.array([[44, 6]], np.int8), expected, None) == (0.0, True)
    assert max_error(np.array([[44, 7]], np.int8), expected, None) == (1.0, False)


def test_bit_identical():
    a = np.zeros((3, 4), dtype=np.float32)
    assert bit_identical(a)
    a[2, 1] = -0.0  # equal as numbers, different bytes
    assert not bit_identical(a)


def test_parse_helpers():
    assert parse_size("64MiB") == 64 * 2**20 and parse_size("1GB") == 10**9 and parse_size("1e6") == 10**6
    assert parse_world_sizes("1-3,8") == [1, 2, 3, 8]
    with pytest.raises(ValueError):
        parse_size("12 parsecs")
    with pytest.raises(ValueError):
        parse_world_sizes("1-")


def test_cli_exit_code_1_on_mismatch(monkeypatch, capsys):
    # an executor that drops one byte of traffic must turn the run red
    real = verify_module.run_collective

    def lossy(*args, **kwargs):
        res = real(*args, **kwargs)
        res.traffic.bytes_sent[0] -= 1
        return res

    monkeypatch.setattr(verify_module, "run_collective", lossy)
    assert main(["--world-sizes", "2-3", "--input", "random", "--numel", "10", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False


@pytest.mark.parametrize("argv", [["--dtype", "foo"], ["--op", "mean"], ["--numel", "10"],
                                  ["--input", "random", "--size", "3B"], ["--world-sizes", "0"],
                                  ["--world-sizes", "4-2"], ["--world-sizes", "100000", "--input", "random"]])
def test_cli_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_version_flag(capsys):
    from ringlab import __version__
    from ringlab.cli import main as cli_main

    assert cli_main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"ringlab {__version__}"


def test_calc_comm_params_in_billions(capsys):
    from ringlab.commands.calc import main as calc_main

    assert calc_main(["comm", "--strategy", "ddp", "--params", "7B", "--world-size", "64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_params"] == 7_000_000_000


def test_table_without_errors_is_the_full_table_less_its_error_magnitudes():
    report = verify([1, 2, 5], input="gradients")
    full, short = report.table().splitlines(), report.table(errors=False).splitlines()
    assert "max abs err" in full[1] and "max abs err" not in short[1] and short[1].endswith("vs full batch")
    col = re.split(r"\s{2,}", full[1].strip()).index("max abs err")
    for got, want in zip(short[3:-1], full[3:-1]):  # one row per world size
        want = re.split(r"\s{2,}", want.strip())
        want = want[:col] + want[col + 1:-1] + [want[-1].split()[-1]]  # "2.4e-07 ok" -> "ok"
        assert re.split(r"\s{2,}", got.strip()) == want
    assert short[-1] == full[-1] == "ALL CHECKS PASSED: 3/3 world sizes"
    assert not re.search(r"\d\.\d+e[-+]\d\d", report.table(errors=False))


def test_seeded_parameters_follow_torch_linear_bounds_and_keep_constants():
    torch = pytest.importorskip("torch")
    from ringlab.sim.gradients import seeded_parameters_

    model = torch.nn.Sequential(torch.nn.Linear(50, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3))
    seeded_parameters_(model, 5)
    w1, b1, g, beta, w2, b2 = (p.detach().numpy() for p in model.parameters())
    assert np.abs(w1).max() <= 50**-0.5 and np.abs(b1).max() <= 50**-0.5 and np.abs(w1).max() > 0.9 * 50**-0.5
    assert np.abs(w2).max() <= 8**-0.5 and np.abs(b2).max() <= 8**-0.5
    assert (g == 1).all() and (beta == 0).all()  # LayerNorm's constant init is kept
    again = torch.nn.Sequential(torch.nn.Linear(50, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3))
    seeded_parameters_(again, 5)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
    norm = torch.nn.LayerNorm(4)
    torch.nn.init.uniform_(norm.weight)  # random now, with no weight matrix before it to take a bound from
    with pytest.raises(ValueError, match="follows no weight"):
        seeded_parameters_(norm, 0)
