"""``ringlab calc roofline | decode | bubble`` through the top-level CLI."""

import json

import pytest

from ringlab.cli import main


def run(capsys, *argv):
    try:
        code = main(["calc", *argv])
    except SystemExit as stop:  # argparse refusing an option's value (ringlab.cli_args): exit 2, one line
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_roofline_p3(capsys):
    code, out, _ = run(capsys, "roofline", "--flops", "512e9", "--bytes", "8e9", "--hardware", "a100-sxm-80gb")
    assert code == 0
    assert "intensity 64 FLOP/B" in out and "ridge 153 FLOP/B" in out and "memory-bound" in out
    assert "3.923 ms" in out and "1.641 ms" in out
    code, out, _ = run(capsys, "roofline", "--flops", "512e9", "--bytes", "8GB", "--hardware", "a100-sxm-80gb", "--json")
    data = json.loads(out)
    assert data["bound"] == "memory" and data["intensity"] == 64
    assert data["time_s"] == pytest.approx(8e9 / 2.039e12)


def test_roofline_dense_unless_sparse(capsys):
    _, out, _ = run(capsys, "roofline", "--flops", "1e12", "--bytes", "1e9", "--hardware", "h100-sxm", "--json")
    assert json.loads(out)["peak_flops"] == 989e12
    _, out, _ = run(capsys, "roofline", "--flops", "1e12", "--bytes", "1e9", "--hardware", "h100-sxm", "--sparse", "--json")
    assert json.loads(out)["peak_flops"] == 1979e12


def test_decode_sla(capsys):
    argv = ["decode", "--model", "llama-2-7b", "--hardware", "a100-sxm-80gb", "--context", "4096", "--sla-ms", "50"]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert "largest batch for 50 ms/token: 27 (bound by memory" in out
    assert "wrong" in out
    code, out, _ = run(capsys, *argv, "--batch", "8", "--json")
    data = json.loads(out)
    assert data["sla"]["batch_size"] == 27 and data["sla"]["bound_by"] == "memory"
    assert data["step"]["batch_size"] == 8 and data["step"]["bound"] == "memory"
    # The wrong model's step is 8 single-sequence steps; the right one is far shorter.
    assert data["naive_linear_model"]["step_time_s"] > 4 * data["step"]["step_time_s"]


def test_decode_needs_sla_or_batch(capsys):
    with pytest.raises(SystemExit):
        main(["calc", "decode", "--model", "llama-2-7b", "--hardware", "a100-sxm-80gb", "--context", "4096"])
    assert "--sla-ms" in capsys.readouterr().err


def test_bubble(capsys):
    code, out, _ = run(capsys, "bubble", "--stages", "8", "--microbatches", "16", "--schedule", "1f1b")
    assert code == 0 and "0.4375 of ideal" in out and "0.3043 of wall clock" in out
    code, out, _ = run(capsys, "bubble", "--stages", "8", "--microbatches", "16", "--schedule", "interleaved-1f1b",
                       "--virtual-stages", "2", "--grid", "--json")
    data = json.loads(out)
    assert data["bubble_fraction_ideal"] == pytest.approx(7 / 32)
    assert data["grid_bubble_fraction_ideal"] == pytest.approx(7 / 32)
    assert data["grid_idle_slots"] == [7 * 3] * 8  # (P-1)(t_f + t_b + t_w) chunk slots, times 1, 1, 1


def test_bubble_grid_text(capsys):
    code, out, _ = run(capsys, "bubble", "--stages", "2", "--microbatches", "2", "--schedule", "gpipe", "--grid")
    assert code == 0
    # Stage 0 waits for B0 from stage 1 (one slot for F1 to arrive there, two for its B0).
    assert "stage 0: F0 F1 .. .. .. B0 B0 B1 B1\nstage 1: .. F0 F1 B0 B0 B1 B1 .. .." in out


@pytest.mark.parametrize("argv, message", [
    (["roofline", "--flops", "-1", "--bytes", "8e9", "--hardware", "a100-sxm-80gb"], "flops"),
    (["roofline", "--flops", "1e9", "--bytes", "8e9", "--hardware", "a100-sxm-80g"], "a100-sxm-80gb"),
    (["decode", "--model", "llama-2-7", "--hardware", "a100-sxm-80gb", "--context", "1", "--batch", "1"], "llama-2-7b"),
    (["decode", "--model", "llama-2-7b", "--hardware", "a100-sxm-80gb", "--context", "1", "--batch", "0"], "argument --batch"),
    (["decode", "--model", "llama-2-7b", "--hardware", "a100-sxm-80gb", "--context", "1", "--sla-ms", "0"], "argument --sla-ms"),
    (["bubble", "--stages", "8", "--microbatches", "16", "--schedule", "1fb1"], "1f1b"),
    (["bubble", "--stages", "0", "--microbatches", "16"], "stages"),
])
def test_errors_exit_2(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err


def test_roofline_tf32_uses_the_tensor_core_peak(capsys):
    _, out, _ = run(capsys, "roofline", "--flops", "1e12", "--bytes", "1e9", "--hardware", "a100-sxm-80gb",
                    "--dtype", "tf32", "--json")
    assert json.loads(out)["peak_flops"] == 156e12  # A100 datasheet: TF32 tensor 156 TFLOPS (312 sparse)
    _, out, _ = run(capsys, "roofline", "--flops", "1e12", "--bytes", "1e9", "--hardware", "a100-sxm-80gb",
                    "--dtype", "fp32", "--json")
    assert json.loads(out)["peak_flops"] == 19.5e12  # plain FP32 is not TF32


def test_decode_reads_only_what_each_layer_holds(capsys):
    # gpt-oss-20b at 32k tokens: 12 full layers hold 32,768 tokens, 12 banded ones 128 (model card).
    code, out, _ = run(capsys, "decode", "--model", "gpt-oss-20b", "--hardware", "gb200", "--context", "32768",
                       "--batch", "1", "--json")
    assert code == 0
    assert json.loads(out)["step"]["kv_bytes_per_sequence"] == 8 * 64 * 2 * 2 * (12 * 32768 + 12 * 128)
