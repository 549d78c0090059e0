"""``ringlab calc train`` over random layouts: a valid one exits 0 with consistent JSON; one bad field exits 2
with one line naming it; never a traceback, a NaN or a hang."""

import contextlib
import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.commands.calc import main


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse's own errors
            code = stop.code
    return code, out.getvalue(), err.getvalue()


@st.composite
def valid_argv(draw):
    """A layout the model takes: degrees that divide heads, layers, batch and experts."""
    model = draw(st.sampled_from(["llama-2-7b", "mixtral-8x7b"]))  # 32 heads, 32 layers (Mixtral: 8 experts)
    tp, pp, cp, dp = (draw(st.sampled_from(options)) for options in ((1, 2, 4, 8), (1, 2, 4), (1, 2), (1, 2, 4)))
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (dp * cp) % e == 0])) if model == "mixtral-8x7b" else 1
    vp = draw(st.sampled_from((1, 2))) if pp > 1 else 1
    mb = draw(st.sampled_from((1, 2)))
    gb = dp * mb * pp * draw(st.integers(1, 4))
    argv = ["train", "--json", "--model", model, "--seq-len", "4096", "--micro-batch", str(mb), "--global-batch",
            str(gb), "--dp", str(dp), "--tp", str(tp), "--pp", str(pp), "--cp", str(cp), "--ep", str(ep), "--vp",
            str(vp), "--zero", draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3", "fsdp_shard_grad_op"])),
            "--recompute", draw(st.sampled_from(["none", "selective", "full"])),
            "--load-imbalance", draw(st.sampled_from(["1", "1.25"])) if ep > 1 else "1"]
    if tp > 1 and draw(st.booleans()):
        argv.append("--sp")
    if draw(st.booleans()):
        argv += ["--topology", "dgx-h100"]
    return argv


@settings(max_examples=40, deadline=None)
@given(argv=valid_argv())
def test_valid_layouts_give_consistent_json(argv):
    code, out, err = _run(argv)
    assert code == 0, (argv, err)
    data = json.loads(out)
    mem = data["memory_per_gpu"]
    parts = mem["params"] + mem["grads"] + mem["optimizer_states"] + mem["activations"] + mem["temporary"]
    assert parts == mem["total"]["bytes"] == max(s["total_bytes"] for s in data["stages"])
    assert sum(i["bytes_sent"] for i in data["traffic_per_step"]) == sum(data["bytes_sent_by_dimension"].values())
    if "step" in data:
        assert 0 < data["step"]["mfu"] <= data["step"]["hfu"] <= 1


BAD = {"--tp": ["3", "0", "-1", "x"], "--pp": ["64"], "--cp": ["3"], "--seq-len": ["0", "-5"],
       "--global-batch": ["0", "1.5"], "--zero": ["zero9"], "--recompute": ["half"], "--load-imbalance": ["0.5", "nan"],
       "--ep": ["3"], "--model": ["llama-2-7o"], "--topology": ["dgx-z100"], "--param-dtype": ["int4"]}


@settings(max_examples=40, deadline=None)
@given(argv=valid_argv(), bad=st.sampled_from([(k, v) for k, vs in BAD.items() for v in vs]))
def test_one_bad_field_is_one_line_error(argv, bad):
    option, value = bad
    argv = [a for a in argv if a != "--sp"] + [option, value]  # the last occurrence wins in argparse
    code, out, err = _run(argv)
    assert code == 2 and out == "", (argv, out)
    assert err.startswith("ringlab calc train: error:") and err.count("\n") == 1, (argv, err)
