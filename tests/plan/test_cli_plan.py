"""``ringlab plan train | serve`` on the command line: the JSON contract, text that fits, refusals with exit 2."""

import json

import pytest

from ringlab.cli import main
from ringlab.commands.plan import sequences_per_step

def run(argv) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse refuses an option's value itself
        return e.code


TRAIN = ["plan", "train", "--model", "llama-3-8b", "--gpus", "32", "--topology", "dgx-h100", "--seq-len", "4096",
         "--global-batch", "128", "--top", "3"]


def test_train_json_contract(capsys):
    assert main(TRAIN + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["layouts"]) == 3
    for row in data["layouts"]:
        assert {"dp", "tp", "pp", "cp", "ep", "zero", "recompute", "micro_batch", "step_seconds", "mfu",
                "memory_bytes", "binding"} <= set(row)
        assert row["dp"] * row["tp"] * row["pp"] * row["cp"] == 32
        assert row["memory_bytes"] <= data["job"]["usable_memory_bytes"]
        assert 0 < row["mfu"] < 1 and row["zero"] in (1, 2, 3)
    steps = [row["step_seconds"] for row in data["layouts"]]
    assert steps == sorted(steps)
    assert data["evaluated"] < data["configurations"] and data["pruned"]


def test_train_text_fits_100_columns(capsys):
    assert main(TRAIN) == 0
    out = capsys.readouterr().out
    assert "binding constraint" in out and "why each loses" in out
    assert max(len(line) for line in out.splitlines()) <= 100


@pytest.mark.parametrize("argv, word", [
    (["--gpus", "0"], "--gpus"), (["--gpus", "12"], "whole 8-GPU nodes"), (["--topology", "tpu-pod"], "topology"),
    (["--model", "no-such-model"], "unknown model"), (["--top", "0"], "--top"), (["--margin", "2"], "--margin"),
    (["--seq-len", "nan"], "--seq-len")])
def test_train_bad_input_exits_2_with_one_line(argv, word, capsys):
    args = list(TRAIN)
    for flag, value in zip(argv[::2], argv[1::2]):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    assert run(args) == 2
    err = capsys.readouterr().err.strip()
    assert word in err and len(err.splitlines()) == 1


def test_tokens_per_step_takes_the_power_of_two_papers_mean():
    assert sequences_per_step(16_000_000, 8192)[0] == 2048  # "16M tokens" of Llama 3 = 2**24
    assert sequences_per_step(2048 * 8192, 8192) == (2048, "")
    with pytest.raises(ValueError, match="--global-batch"):
        sequences_per_step(1_500_000, 8192)


def test_plan_without_a_search_names_both(capsys):
    assert main(["plan", "nope"]) == 2
    assert "train, serve" in capsys.readouterr().err


def test_serve_bad_trace_exits_2(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,12,x\n")
    assert run(["plan", "serve", "--model", "llama-3-8b", "--trace", str(trace), "--sla-ttft", "500ms",
                 "--sla-tpot", "50ms"]) == 2
    assert "line 2" in capsys.readouterr().err
