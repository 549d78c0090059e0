"""``ringlab calc train``: output, JSON, config.json input and one-line errors."""

import json
from pathlib import Path

import pytest

from ringlab.calc import MODELS
from ringlab.calc.training.layout import ParallelLayout
from ringlab.calc.training.plan import train_plan
from ringlab.cli import main as ringlab_main
from ringlab.commands.calc import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs"
BASE = ["train", "--model", "llama-2-7b", "--seq-len", "4096", "--global-batch", "16", "--dp", "2", "--tp", "4",
        "--pp", "2", "--sp"]


def test_text_and_json_agree_with_the_library(capsys):
    assert main(BASE) == 0
    text = capsys.readouterr().out
    assert "memory per GPU" in text and "all_gather" in text and "send_recv" in text
    assert main(BASE + ["--json", "--topology", "dgx-h100"]) == 0
    data = json.loads(capsys.readouterr().out)
    plan = train_plan("llama-2-7b", ParallelLayout(2, 4, 2, sequence_parallel=True), 4096, 1, 16,
                      topology="dgx-h100")
    b = plan.busiest
    assert data["memory_per_gpu"]["total"]["bytes"] == plan.memory[b].total
    assert data["bytes_sent_by_dimension"] == plan.traffic_by_dimension()
    assert data["step"]["mfu"] == pytest.approx(plan.time.mfu)
    assert data["world_size"] == 16 and data["num_microbatches"] == 8


def test_config_json_and_top_level(capsys):
    argv = ["calc", "train", "--model", str(FIXTURES / "llama-2-70b.json"), "--seq-len", "4096", "--global-batch",
            "8", "--dp", "8", "--zero", "zero3", "--recompute", "full", "--json"]
    assert ringlab_main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    n = MODELS["llama-2-70b"].param_count()
    assert data["memory_per_gpu"]["params"] == -(-n // 8) * 2  # ZeRO-3 shards the weights over dp = 8
    assert data["flops_per_step"]["hardware"] > data["flops_per_step"]["model"]


@pytest.mark.parametrize("extra, message", [
    (["--tp", "3"], "num_attention_heads"),
    (["--zero", "zero4"], "unknown strategy"),
    (["--recompute", "some"], "recompute must be one of"),
    (["--tp", "0"], "argument --tp"),
    (["--ep", "2"], "MoE"),
    (["--topology", "dgx-z100"], "unknown topology"),
    (["--efficiency", "0"], "argument --efficiency"),
    (["--param-dtype", "int4"], "sub-byte"),
])
def test_errors_exit_2_with_one_line(capsys, extra, message):
    try:
        code = main(BASE + extra)
    except SystemExit as stop:  # argparse's own errors
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
