import json
from pathlib import Path

import pytest

from ringlab.cli import main as ringlab_main
from ringlab.commands.calc import SUBCOMMANDS, main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def test_kv_text_and_json(capsys):
    argv = ["kv", "--model", "llama-2-70b", "--tokens", "4096", "--batch", "32", "--dtype", "fp16"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "327,680 B" in out and "42,949,672,960 B (42.95 GB / 40.00 GiB)" in out
    assert main(argv + ["--json", "--tp", "4"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"]["bytes"] == 42_949_672_960 // 4 and data["kv_heads_per_rank"] == 2


def test_kv_from_config_json_path(capsys):
    assert main(["kv", "--model", str(FIXTURES / "llama-2-70b.json"), "--tokens", "4096", "--batch", "32",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["bytes"] == 42_949_672_960


def test_comm_through_top_level_cli(capsys):
    argv = ["calc", "comm", "--strategy", "fsdp_full_shard", "--params", "7e9", "--world-size", "64", "--json"]
    assert ringlab_main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bytes_sent_per_rank"] == 41_343_750_000
    assert [c["pass"] for c in data["breakdown"]] == ["forward", "backward", "backward"]
    assert ringlab_main(argv[:-1] + ["--bandwidth", "450GB"]) == 0
    assert "41,343,750,000 B" in capsys.readouterr().out


def test_errors_exit_2_with_message(capsys):
    assert main(["kv", "--model", "llama-2-7o", "--tokens", "10"]) == 2
    assert "Close matches: llama-2-7b, llama-2-70b" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:  # refused by the option's type (ringlab.cli_args): one line
        main(["kv", "--model", "llama-2-70b", "--tokens", "-1"])
    assert stop.value.code == 2 and "argument --tokens" in capsys.readouterr().err
    assert main(["comm", "--strategy", "zero4", "--params", "7e9", "--world-size", "8"]) == 2
    assert "unknown strategy" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["comm", "--strategy", "ddp", "--params", "lots", "--world-size", "8"])
    assert main(["nope"]) == 2


def test_usage_lists_calculators(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in SUBCOMMANDS)


def test_kv_breaks_the_cache_down_by_layer_kind(capsys):
    assert main(["kv", "--model", str(FIXTURES / "gemma-3-27b.json"), "--tokens", "32768", "--dtype", "bf16",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["mixer"]: row for row in data["layers"]}
    # Gemma 3 report: 62 layers, 5 local (window 1024) : 1 global; 16 KV heads of 128 -> 8,192 B/token/layer
    assert rows["sliding"]["layers"] == 52 and rows["sliding"]["held_tokens"] == 1024
    assert rows["full"]["layers"] == 10 and rows["full"]["held_tokens"] == 32768
    assert data["total"]["bytes"] == 8192 * (52 * 1024 + 10 * 32768)
    assert any("vision_config not counted" in n for n in data["notes"])
    assert main(["kv", "--model", "nemotron-h-56b", "--tokens", "4096"]) == 0
    out = capsys.readouterr().out
    assert "54 x mamba: no KV cache" in out and "10 x full" in out


def test_kv_refuses_unsupported_layouts(capsys, tmp_path):
    config = json.loads((FIXTURES / "deepseek-v3.2.json").read_text())
    config["num_kv_shared_layers"] = 20  # KV shared across layers is not modelled
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["kv", "--model", str(tmp_path / "config.json"), "--tokens", "10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not supported" in err and "num_kv_shared_layers" in err


def test_comm_takes_the_parameters_of_a_model(capsys):
    assert main(["comm", "--strategy", "ddp", "--model", str(FIXTURES / "gpt2.json"), "--world-size", "4",
                 "--dtype", "fp32", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n_params"] == 124_439_808
    assert data["bytes_sent_per_rank"] == 2 * 3 * 124_439_808 * 4 // 4
    with pytest.raises(SystemExit) as stop:  # argparse: --params and --model exclude each other
        main(["comm", "--strategy", "ddp", "--model", "llama-2-7b", "--params", "7e9", "--world-size", "4"])
    assert stop.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
