import json
from pathlib import Path

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
    assert main(["kv", "--model", "llama-2-70b", "--tokens", "-1"]) == 2
    assert "tokens" in capsys.readouterr().err
    assert main(["comm", "--strategy", "zero4", "--params", "7e9", "--world-size", "8"]) == 2
    assert "unknown strategy" in capsys.readouterr().err
    assert main(["comm", "--strategy", "ddp", "--params", "lots", "--world-size", "8"]) == 2
    assert main(["nope"]) == 2


def test_usage_lists_calculators(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in SUBCOMMANDS)
