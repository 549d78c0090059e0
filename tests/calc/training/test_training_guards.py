"""Training-calculator guards (issue 31): sub-byte activations refused by name, the GPU count bounded as a
product, options that would be ignored refused, efficiency bounded, config layer counts bounded."""

from __future__ import annotations

import json

import pytest

from ringlab.calc.hf_config import MAX_LAYERS
from ringlab.calc.training.layout import MAX_WORLD_SIZE, ParallelLayout
from ringlab.calc.training.plan import train_plan
from ringlab.calc.training.step import MIN_EFFICIENCY
from ringlab.cli import main as cli_main

LLAMA = "tests/fixtures/hf_configs/llama-2-70b.json"


@pytest.mark.parametrize("dtype", ["fp4", "int4", "nvfp4", "mxfp4"])
@pytest.mark.parametrize("tp", [1, 2])
def test_sub_byte_activations_are_refused_by_name(dtype, tp):
    with pytest.raises(ValueError, match=rf"act_dtype '{dtype}' is sub-byte"):
        train_plan("llama-2-7b", ParallelLayout(dp=2, tp=tp), 4096, 1, 8, act_dtype=dtype)


def test_byte_activations_scale_with_their_size():
    plans = {d: train_plan("llama-2-7b", ParallelLayout(dp=2, tp=2), 4096, 1, 8, act_dtype=d) for d in ("bf16", "fp8")}
    bf16, fp8 = (plans[d].memory[0].activations.layers for d in ("bf16", "fp8"))
    assert 0 < fp8 < bf16  # masks and fp32 log-sum-exp terms do not halve; the rest does


def test_world_size_is_bounded_as_a_product():
    ParallelLayout(dp=MAX_WORLD_SIZE // 8, tp=8)  # exactly at the bound
    with pytest.raises(ValueError, match=f"above {MAX_WORLD_SIZE:,}"):
        ParallelLayout(dp=2**20, tp=2**20)
    with pytest.raises(ValueError, match="check the degrees"):
        ParallelLayout(dp=1024, tp=1024, pp=1024, cp=1024)


def test_cli_refuses_a_product_of_degrees(capsys):
    code = cli_main(["calc", "train", "--model", "llama-2-7b", "--seq-len", "4096", "--global-batch", "1048576",
                     "--dp", "1048576", "--tp", "1048576"])
    err = capsys.readouterr().err
    assert code == 2 and "1,099,511,627,776 GPUs" in err


def test_hardware_without_topology_is_refused():
    with pytest.raises(ValueError, match="needs topology"):
        train_plan("llama-2-7b", ParallelLayout(dp=8), 4096, 1, 8, hardware="h100-sxm")


def test_cli_hardware_without_topology(capsys):
    code = cli_main(["calc", "train", "--model", "llama-2-7b", "--seq-len", "4096", "--global-batch", "8",
                     "--dp", "8", "--hardware", "h100-sxm"])
    err = capsys.readouterr().err
    assert code == 2 and "--hardware" in err and "--topology" in err


def _exit_code(argv: list[str]) -> int:
    try:
        return cli_main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("value", ["1e-320", "0.001", "0"])
def test_efficiency_below_the_bound_is_refused(value, capsys):
    code = _exit_code(["calc", "train", "--model", "llama-2-7b", "--seq-len", "4096", "--global-batch", "8", "--dp",
                       "8", "--topology", "dgx-h100", "--efficiency", value])
    err = capsys.readouterr().err
    assert code == 2 and "--efficiency" in err and len(err.strip().splitlines()) == 1


def test_efficiency_at_the_bound_gives_a_finite_mfu(capsys):
    code = cli_main(["calc", "train", "--model", "llama-2-7b", "--seq-len", "4096", "--global-batch", "8", "--dp", "8",
                     "--topology", "dgx-h100", "--efficiency", str(MIN_EFFICIENCY), "--json"])
    step = json.loads(capsys.readouterr().out)["step"]
    assert code == 0 and 0 < step["mfu"] <= MIN_EFFICIENCY


@pytest.mark.parametrize("command", [["calc", "train", "--seq-len", "4096", "--global-batch", "8"],
                                     ["serve-sim", "--seconds", "1"]])
def test_config_layer_count_is_bounded(command, tmp_path, capsys):
    cfg = json.loads(open(LLAMA).read())
    cfg["num_hidden_layers"] = 10**8
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert _exit_code([*command, "--model", str(path)]) == 2
    err = capsys.readouterr().err
    assert "num_hidden_layers" in err and f"{MAX_LAYERS:,}" in err
