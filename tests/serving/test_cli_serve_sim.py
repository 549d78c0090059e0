"""``ringlab serve-sim``: text and JSON output, the naive policy's livelock, and one-line errors."""

import json
import subprocess
import sys

import pytest

from ringlab.calc import max_cached_tokens
from ringlab.commands.serve_sim import main


def test_json_metrics_of_a_short_trace(capsys):
    assert main(["--blocks", "500", "--rate", "20", "--seconds", "2", "--n", "2", "--shared-prefix", "64",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["blocks"] == 500 and data["block_bytes"] == 8_388_608  # llama-2-7b: bf16 is 2 B like fp16
    assert data["finished"] == data["requests"] > 20 and data["livelock"] is False
    assert data["prefix_cache_hit_blocks"] >= 4 * (data["requests"] - 1)  # 64 shared tokens = 4 full blocks
    assert data["copy_on_write_copies"] > 0 and data["ttft_p50_s"] > 0 and data["tpot_p99_s"] > 0


def test_default_pool_is_what_fits_next_to_the_weights(capsys):
    assert main(["--seconds", "0.5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["blocks"] == max_cached_tokens("llama-2-7b", "h100-sxm", "bf16") // 16


def test_text_output_names_the_setup_and_the_metrics(capsys):
    assert main(["--blocks", "300", "--seconds", "1", "--policy", "naive"]) == 0
    out = capsys.readouterr().out
    assert "policy naive" in out and "TTFT ms" in out and "TPOT ms" in out and "throughput" in out


def test_the_cli_runs_through_the_entry_point():
    out = subprocess.run([sys.executable, "-m", "ringlab", "serve-sim", "--blocks", "200", "--seconds", "0.5"],
                         capture_output=True, text=True, check=True).stdout
    assert "requests" in out


@pytest.mark.parametrize("argv, option", [
    (["--rate", "0"], "--rate"), (["--blocks", "-3"], "--blocks"), (["--hardware", "h999"], "--hardware"),
    (["--model", "gpt-9"], "--model"), (["--preemption", "drop"], "--preemption"), (["--dtype", "fp7"], "--dtype"),
    (["--watermark", "1.5"], "--watermark"), (["--block-size", "0"], "--block-size"),
    (["--rate", "fast"], "--rate"), (["--model", "llama-3.1-405b", "--hardware", "l4"], "--blocks"),
    (["--hardware", "t4", "--blocks", "100"], "--dtype"),
    (["--blocks", "1000000000000"], "--blocks"), (["--rate", "1e9"], "shorten the trace"),
    (["--prompt-len", "1000000000"], "prompt_len"), (["--rate", "inf"], "rate"), (["--seconds", "nan"], "--seconds"),
])
def test_errors_exit_2_with_one_line_naming_the_option(argv, option, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and option in err and err.count("\n") == 1
