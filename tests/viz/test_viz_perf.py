"""Figures and explorers of the performance notebooks (roofline, decode batching, pipeline bubbles)."""

import math

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ringlab.calc import decode_step  # noqa: E402
from ringlab.viz.decode import decode_explorer, naive_max_batch, plot_decode  # noqa: E402
from ringlab.viz.pipeline import compare_schedules, draw_schedule, pipeline_explorer, plot_bubble_curves  # noqa: E402
from ringlab.viz.roofline import example_kernels, plot_roofline, roofline_explorer  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _controls(box) -> dict:
    """Every widget with a description under ``box``, by description."""
    found, stack = {}, [box]
    while stack:
        w = stack.pop()
        if getattr(w, "description", ""):
            found[w.description] = w
        stack.extend(getattr(w, "children", ()))
    return found


def _image(box):
    return box.children[-1]


def _moves_image(box, description, value):
    before = _image(box).value
    _controls(box)[description].value = value
    after = _image(box).value
    return bytes(before) != bytes(after) and bytes(after[:4]) == b"\x89PNG"


# --- roofline ---------------------------------------------------------------------------------

def test_roofline_has_one_panel_per_chip_with_its_ridge():
    fig = plot_roofline(hardware=("a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm"))
    axes = fig.axes
    assert len(axes) == 3
    texts = [" ".join(t.get_text() for t in ax.texts) for ax in axes]
    # ridges by hand: 312/1.555 = 200.6, 312/2.039 = 153.0, 989/3.35 = 295.2
    assert "ridge 201 FLOP/B" in texts[0] and "ridge 153 FLOP/B" in texts[1] and "ridge 295 FLOP/B" in texts[2]
    assert "989 TFLOP/s dense" in axes[2].get_title()
    assert axes[0].get_xscale() == axes[0].get_yscale() == "log"


def test_p3_kernel_sits_on_the_bandwidth_roof():
    fig = plot_roofline([("P3", 512e9, 8e9)], hardware="a100-sxm-80gb")
    (point,) = [line for line in fig.axes[0].lines if line.get_label() == "P3"]
    x, y = point.get_xdata()[0], point.get_ydata()[0]
    assert x == pytest.approx(64)  # 512e9 / 8e9 FLOP/B
    assert y == pytest.approx(64 * 2.039)  # TFLOP/s: intensity x bandwidth, below the 312 peak
    assert point.get_markerfacecolor() != "white"  # memory-bound markers are filled


def test_compute_bound_kernels_are_hollow():
    fig = plot_roofline([("big matmul", 2 * 8192**3, 6 * 8192**2)], hardware="h100-sxm")
    (point,) = [line for line in fig.axes[0].lines if line.get_label() == "big matmul"]
    assert point.get_markerfacecolor() == "white"
    assert point.get_ydata()[0] == pytest.approx(989)


def test_example_kernels_include_fused_and_unfused_chains():
    kernels = {label: (f, b) for label, f, b in example_kernels()}
    unfused, fused = kernels["4 elementwise ops, unfused"], kernels["4 elementwise ops, fused"]
    assert unfused[0] == fused[0] and fused[1] * 4 == unfused[1]  # 2 tensors moved instead of 8


@pytest.mark.parametrize("bad", [(), ("a100-sxm-8gb",)])
def test_roofline_rejects_bad_hardware(bad):
    with pytest.raises(ValueError):
        plot_roofline(hardware=bad)


def test_roofline_explorer_redraws_on_every_control():
    box = roofline_explorer(hardware=("a100-sxm-80gb",))  # one panel keeps the test fast
    assert _moves_image(box, "m", 2048)
    assert _moves_image(box, "k", 128)
    assert _moves_image(box, "ops", 7)
    assert _moves_image(box, "hardware", ("h100-sxm",))
    assert "h100-sxm" in box.children[1].value and "a100" not in box.children[1].value


# --- decode -----------------------------------------------------------------------------------

def test_decode_figure_draws_right_and_wrong_models():
    batch = np.array([1, 2, 4, 8, 16, 32, 64])
    fig = plot_decode("llama-2-7b", "a100-sxm-80gb", 4096, 0.05, batch_sizes=batch)
    ax_t, ax_r = fig.axes
    lines = {line.get_label(): line for line in ax_t.lines}
    right = lines["step time (right model)"].get_ydata()
    wrong = [line for label, line in lines.items() if label.startswith("circulating")][0].get_ydata()
    assert wrong == pytest.approx(batch * right[0])  # the wrong model: batch x step(1)
    assert right[3] < 2.1 * right[0]  # batch 8 costs about twice batch 1 (KV 2.1 GB per sequence), not 8x
    assert lines["SLA 50 ms/token"].get_ydata()[0] == pytest.approx(50)
    stars = [line for line in ax_t.lines if line.get_label().startswith("max batch 27")]
    assert stars and "memory" in stars[0].get_label()
    throughput = {line.get_label(): line for line in ax_r.lines}["tokens/s (right model)"].get_ydata()
    assert np.all(np.diff(throughput) > 0)


def test_decode_memory_wall_shading_starts_after_the_memory_limit():
    fig = plot_decode("llama-2-7b", "a100-sxm-80gb", 4096, 0.05, batch_sizes=np.arange(1, 65))
    spans = [p for p in fig.axes[0].patches if p.get_x() > 1]
    # (0.9 x 80e9 - weights) / KV per sequence = 27.0 -> 27 fit, the wall is drawn at 27.5
    assert spans and spans[0].get_x() == pytest.approx(27.5)


def test_naive_max_batch_is_sla_over_batch_one_step():
    step1 = decode_step("llama-2-7b", "a100-sxm-80gb", 1, 4096).step_time_s
    assert naive_max_batch("llama-2-7b", "a100-sxm-80gb", 4096, 0.05) == math.floor(0.05 / step1) == 6


def test_decode_explorer_redraws_and_limits_tp_to_head_divisors():
    box = decode_explorer()
    assert "largest batch: 27 (bound by memory" in box.children[1].value
    assert _moves_image(box, "SLA (ms)", 20.0)
    assert _moves_image(box, "context", 1024)
    assert _moves_image(box, "hardware", "h100-sxm")
    assert _moves_image(box, "tp", 2)
    assert _moves_image(box, "model", "falcon-7b")
    assert tuple(_controls(box)["tp"].options) == (1,)  # 71 heads: only tp = 1 divides them


# --- pipeline ---------------------------------------------------------------------------------

def test_schedule_grid_shows_every_op_and_the_idle_background():
    fig = draw_schedule(8, 16, "1f1b")
    ax = fig.axes[0]
    assert len(ax.collections) == 8 * (1 + 2 * 16)  # per stage: one idle bar, M forwards, M backwards
    title = ax.get_title()
    assert "measured ideal 0.4375, total 0.3043" in title and "closed form ideal 0.4375, total 0.3043" in title
    assert "168 idle of 552 slots" in title  # 7 x 3 slots idle per stage x 8; makespan (16 + 7) x 3 = 69


def test_zb_h1_without_closed_form_still_draws():
    title = draw_schedule(4, 2, "zb-h1").axes[0].get_title()
    assert "no closed form" in title


def test_compare_schedules_shares_one_time_axis():
    fig = compare_schedules(4, 8)
    assert len(fig.axes) == 4
    assert len({ax.get_xlim() for ax in fig.axes}) == 1
    assert "v=2" in fig.axes[2].get_title()


def test_bubble_curves_match_p10():
    fig = plot_bubble_curves(stages=8, max_microbatches=64, relative_to="total")
    line = {ln.get_label(): ln for ln in fig.axes[0].lines}["1f1b"]
    x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    assert y[x == 16][0] == pytest.approx(7 / 23)


def test_pipeline_explorer_redraws_and_keeps_interleaving_valid():
    box = pipeline_explorer(stages=4, microbatches=6, schedule="1f1b")
    c = _controls(box)
    assert c["v (chunks)"].disabled
    assert _moves_image(box, "P (stages)", 3)
    assert _moves_image(box, "M (micro)", 12)
    assert _moves_image(box, "schedule", "interleaved-1f1b")
    assert not c["v (chunks)"].disabled
    assert _moves_image(box, "v (chunks)", 3)
    assert _moves_image(box, "P (stages)", 5)
    assert c["M (micro)"].value % 5 == 0  # rounded up to a multiple of P
    assert "closed form: ideal" in box.children[1].value
    assert _moves_image(box, "schedule", "gpipe")
    assert c["v (chunks)"].disabled and c["M (micro)"].step == 1
