"""Topic 21's figures and explorer: trace summaries, length histograms, hit-rate curves, the chunk sweep."""

import json
import struct

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import ipywidgets as w  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from ringlab.serving.traces import TraceRequest, load_trace, trace_path  # noqa: E402
from ringlab.viz import traffic  # noqa: E402
from ringlab.viz._controls import controls, reachable  # noqa: E402
from ringlab.viz._mpl import EXPLORER_DPI  # noqa: E402


def test_summary_of_a_small_trace_by_hand():
    records = [TraceRequest(0.0, 10, 1), TraceRequest(0.5, 30, 5), TraceRequest(2.0, 20, 3), TraceRequest(4.0, 100, 7)]
    s = traffic.trace_summary(records)
    assert s == dict(requests=4, input_mean=40.0, input_median=25.0, output_mean=4.0, output_median=4.0,
                     rate_per_s=3 / 4.0)
    assert traffic.trace_summary(records[:1])["rate_per_s"] is None
    with pytest.raises(ValueError, match="records"):
        traffic.trace_summary([])


def test_summary_of_the_mooncake_excerpt_matches_its_file():
    rows = [json.loads(line) for line in trace_path("mooncake-conv").read_text().splitlines() if line.strip()]
    s = traffic.trace_summary(load_trace(trace_path("mooncake-conv")))
    assert s["requests"] == len(rows) == 300
    assert s["input_mean"] == pytest.approx(np.mean([r["input_length"] for r in rows]))
    assert s["output_median"] == np.median([r["output_length"] for r in rows])
    assert s["rate_per_s"] == pytest.approx(299 / ((rows[-1]["timestamp"] - rows[0]["timestamp"]) / 1e3))


def test_length_histograms_one_outline_per_trace_on_log_axes():
    traces = {"azure-conv": [TraceRequest(0.0, 10, 2), TraceRequest(1.0, 1000, 200)],
              "mooncake-conv": [TraceRequest(0.0, 5000, 300)]}
    fig, axes = plt.subplots(1, 2)
    traffic.plot_lengths(traces, axes)
    for ax in axes:
        assert len(ax.patches) == 2 and ax.get_xscale() == "log"
        assert [to_hex(p.get_edgecolor()) for p in ax.patches] == [traffic.TRACE_COLORS["azure-conv"],
                                                                   traffic.TRACE_COLORS["mooncake-conv"]]
    assert [t.get_text() for t in axes[0].get_legend().get_texts()] == list(traces)
    plt.close(fig)


def test_hit_curves_plot_percentages_the_ceiling_and_the_mark():
    curves = {"vllm-v1": {100: 0.01, 200: 0.05}, "uncached-first": {100: 0.02, 200: 0.06}}
    fig, ax = plt.subplots()
    traffic.plot_hit_curves(curves, 0.08, ax, mark=("vllm-v1", 200))
    by_label = {line.get_label(): line for line in ax.lines}
    assert list(by_label["vllm-v1"].get_ydata()) == pytest.approx([1.0, 5.0])
    assert list(by_label["uncached-first"].get_xdata()) == [100, 200]
    assert list(by_label["infinite cache 8.00%"].get_ydata()) == pytest.approx([8.0, 8.0])
    circled = [line for line in ax.lines if line.get_label().startswith("_")]
    assert len(circled) == 1 and (circled[0].get_xdata()[0], circled[0].get_ydata()[0]) == (200, pytest.approx(5.0))
    plt.close(fig)


def test_chunk_sweep_in_ms_with_misses_in_red():
    rows = [dict(max_num_batched_tokens=256, ttft_p99_s=0.2, tpot_p99_s=0.006, meets_p99=True),
            dict(max_num_batched_tokens=1024, ttft_p99_s=0.7, tpot_p99_s=0.01, meets_p99=False)]
    fig, axes = plt.subplots(1, 2)
    traffic.plot_chunk_sweep(rows, 0.5, 0.05, axes)
    assert list(axes[0].lines[0].get_ydata()) == pytest.approx([200.0, 700.0])
    assert list(axes[1].lines[0].get_ydata()) == pytest.approx([6.0, 10.0])
    assert list(axes[0].lines[1].get_ydata()) == pytest.approx([500.0, 500.0])  # the SLA
    faces = [to_hex(c) for c in axes[0].collections[0].get_facecolors()]
    assert faces == ["#55a868", "#c44e52"]
    plt.close(fig)


@pytest.fixture(scope="module")
def explorer():
    return traffic.traffic_explorer("azure-conv", rate_scale=1, chunk=512, sla_ttft=0.5, policy="vllm-v1", pool=2000)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_explorer_controls_open_on_their_values_and_send_on_release(explorer):
    found = {c.description: c for c in controls(explorer)}
    assert (found["trace"].value, found["x recorded rate"].value, found["chunk"].value, found["TTFT SLA (s)"].value,
            found["policy"].value, found["pool (blocks)"].value) == ("azure-conv", 1, 512, 0.5, "vllm-v1", 2000)
    for c in found.values():
        assert reachable(c)
        if isinstance(c, w.SelectionSlider):
            assert c.continuous_update is False
    assert isinstance(explorer.children[-1], w.Image) and explorer.children[-1].layout.max_width == "100%"
    width, height = _png_size(bytes(explorer.children[-1].value))
    assert width <= 1090 and height <= 560  # the output area of a notebook in a 1280 x 860 window


def test_explorer_caption_follows_the_pool_and_the_trace(explorer):
    found = {c.description: c for c in controls(explorer)}
    caption = explorer.children[2]
    # the hit rates prefix_hits' docstring states for the bundled Mooncake excerpt under vllm-v1
    assert "2,000 blocks: hit rate 3.65%" in caption.value and "8.24% ceiling" in caption.value
    before = bytes(explorer.children[-1].value)
    found["pool (blocks)"].value = 5000
    assert "5,000 blocks: hit rate 5.67%" in caption.value
    assert bytes(explorer.children[-1].value) != before
    found["trace"].value = "azure-code"
    assert "<b>azure-code</b>, 300 requests" in caption.value and "300 finished" in caption.value


def test_explorer_text_is_at_least_11_px(monkeypatch):
    figures = []
    real = traffic.show
    monkeypatch.setattr(traffic, "show", lambda image, caption, fig, text: (figures.append(fig.fig),
                                                                            real(image, caption, fig, text)))
    traffic.traffic_explorer()
    texts = [t for t in figures[-1].findobj(Text) if t.get_visible() and t.get_text().strip()]
    small = {t.get_text(): t.get_fontsize() * EXPLORER_DPI / 72 for t in texts
             if t.get_fontsize() * EXPLORER_DPI / 72 < 11}
    assert texts and not small


@pytest.mark.parametrize("kwargs, argument", [
    (dict(trace="sharegpt"), "trace"), (dict(rate_scale=3), "rate_scale"), (dict(chunk=300), "chunk"),
    (dict(sla_ttft=0.3), "sla_ttft"), (dict(policy="lru"), "policy"), (dict(pool=1234), "pool"),
])
def test_an_argument_no_control_can_show_is_refused_by_name(kwargs, argument):
    with pytest.raises(ValueError, match=f"^{argument} must be"):
        traffic.traffic_explorer(**kwargs)
