"""Figures and explorers of notebooks 04 (DDP vs FSDP traffic) and 05 (KV cache)."""

import math

import matplotlib
import pytest

matplotlib.use("Agg")

from ringlab.calc import GB, MODELS  # noqa: E402
from ringlab.viz import comm, kvcache  # noqa: E402

P2 = 7_000_000_000
M = P2 * 2  # bf16 message, 14 GB


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _labels(fig):
    """All y-axis labels of a figure, secondary axes included."""
    return [a.get_ylabel() for a in fig.axes] + [
        c.get_ylabel() for a in fig.axes for c in a.child_axes]


# ---------------------------------------------------------------- notebook 04

def test_traffic_curves_give_the_p2_numbers():
    curves = comm.traffic_curves(P2, world_sizes=(1, 2, 64))
    assert curves["ddp"].tolist() == [0, M, 2 * 63 * M // 64]  # N=2: 2 x 1/2 x M = M
    assert curves["ddp"][2] == 27_562_500_000
    assert curves["fsdp_full_shard"][2] == 41_343_750_000 == 3 * 63 * M // 64
    assert curves["fsdp_shard_grad_op"][2] == curves["zero2"][2] == curves["ddp"][2]


def test_traffic_plot_merges_equal_curves_and_labels_gb_and_gib():
    fig = comm.plot_traffic_vs_world_size(P2, highlight="fsdp_full_shard", mark=64)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["ddp = zero1 = zero2 = fsdp_shard_grad_op", "fsdp_full_shard", "hybrid_shard"]
    labels = _labels(fig)
    assert any("GB (1e9 B)" in s for s in labels) and any("GiB (2^30 B)" in s for s in labels)
    full = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "fsdp_full_shard"][0]
    assert full.get_linewidth() > 2  # highlighted
    assert full.get_ydata()[6] == pytest.approx(41.34375)  # N = 2**6, in GB
    assert "M = 14.00 GB = 13.04 GiB" in fig.axes[0].get_title()


def test_memory_bars_show_what_fsdp_buys():
    fig = comm.plot_memory_per_gpu(P2, 64)
    totals = [float(t.get_text()) for t in fig.axes[0].texts]
    # ddp: 2 + 2 + 12 B/param, all replicated; full_shard: all of it / 64
    assert totals[comm.STRATEGIES.index("ddp")] == pytest.approx(16 * P2 / GB)
    sharded = totals[comm.STRATEGIES.index("fsdp_full_shard")]
    assert sharded == pytest.approx(16 * P2 / 64 / GB, abs=0.06)  # the label has one decimal


def test_comm_time_uses_the_links_the_rings_cross():
    intra = comm.strategy_comm("ddp", P2, 8)
    assert comm.comm_time(intra) == pytest.approx(14 * 2e-6 + 2 * 7 / 8 * M / 450e9)  # nvlink4
    inter = comm.strategy_comm("ddp", P2, 64)
    # NCCL-style channels leave each DGX H100 node on all 8 NICs: 8 x 50 GB/s, 5 us per network step
    assert comm.comm_time(inter) == pytest.approx(126 * 5e-6 + 27_562_500_000 / 400e9)
    hybrid = comm.strategy_comm("hybrid_shard", P2, 64)
    # 3 intra-node ring passes of M over 8 GPUs on NVLink + an all_reduce of M/8 over 8 nodes on IB
    want = 3 * (7 * 2e-6 + 7 / 8 * M / 450e9) + 14 * 5e-6 + 2 * 7 / 8 * (M / 8) / 50e9
    assert comm.comm_time(hybrid) == pytest.approx(want)


def test_describe_comm_states_the_ratio():
    text = comm.describe_comm(P2, "fsdp_full_shard", 64)
    assert "41,343,750,000 B" in text and "1.5 x DDP" in text and "38.50 GiB" in text


def test_model_params_accepts_names_and_counts():
    assert comm.model_params("llama-2-7b") == (MODELS["llama-2-7b"].param_count(), "llama-2-7b")
    assert comm.model_params(7e9) == (P2, "7e9 params")
    with pytest.raises(ValueError):
        comm.model_params(0)


def test_comm_explorer_controls_redraw():
    box = comm.comm_explorer()
    (model_dd, strategy_dd), size, cluster_dd, caption, image = (
        list(box.children[0].children), box.children[1], box.children[2], box.children[3], box.children[4])
    before, text = image.value, caption.value
    size.value = 8
    assert image.value != before and caption.value != text
    before = image.value
    strategy_dd.value = "ddp"
    assert image.value != before
    text = caption.value
    cluster_dd.value = "dgx-b200"  # N = 8 stays inside a node: NVLink 5 sets the time
    assert caption.value != text
    before = image.value
    model_dd.value = "llama-2-70b"
    assert image.value != before and "llama-2-70b" in caption.value


# ---------------------------------------------------------------- notebook 05

def test_crossover_tokens_by_hand():
    weights = MODELS["llama-2-7b"].param_count() * 2  # bf16
    per_token = 2 * 32 * 32 * 128 * 2  # MHA, fp16
    assert kvcache.crossover_tokens("llama-2-7b") == math.ceil(weights / per_token) == 25_706
    weights70 = MODELS["llama-2-70b"].param_count() * 2
    assert kvcache.crossover_tokens("llama-2-70b", batch_size=32) == math.ceil(weights70 / (327_680 * 32))
    assert kvcache.crossover_tokens("mistral-7b") is None  # 4096-token window: 0.5 GB at most


def test_crossover_respects_tp_split():
    # TP 8 divides both the weights and the 8 KV heads by 8: the crossover does not move
    assert kvcache.crossover_tokens("llama-2-70b", tp=8) == kvcache.crossover_tokens("llama-2-70b")


def test_describe_kv_p5():
    text = kvcache.describe_kv("llama-2-70b", "fp16", 4096, 32)
    assert "327,680 B per token" in text and "42,949,672,960 B" in text and "40.00 GiB" in text
    assert "8x this: 343,597,383,680 B" in text


def test_describe_kv_window_mla_and_tp_replication():
    assert "min(tokens, 4096) = 4,096" in kvcache.describe_kv("mistral-7b", "fp16", 8192, 1)
    assert "61 layers x (512 + 64) x 1 B = <b>35,136 B" in kvcache.describe_kv("deepseek-v3", "fp8", 4096, 1)
    # TP 16 > 8 KV heads: each rank holds 1 replicated head; 64 query heads would give 4 per rank
    assert "4x this" in kvcache.describe_kv("llama-2-70b", "fp16", 4096, 32, tp=16)


def test_kv_plot_marks_crossovers_and_labels_units():
    fig = kvcache.plot_kv_vs_context(("llama-2-7b", "mistral-7b"), mark=4096)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["llama-2-7b (MHA 32/32): 25.7k tokens", "mistral-7b (GQA 8/32, window 4096): never"]
    dots = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert len(dots) == 1 and dots[0].get_xdata()[0] == 25_706
    curve = ax.get_lines()[0]
    assert curve.get_ydata()[4] == pytest.approx(524_288 * 4096 / GB)  # 2**12 tokens
    labels = _labels(fig)
    assert any("GB (1e9 B)" in s for s in labels) and any("GiB (2^30 B)" in s for s in labels)


def test_gpu_budget_bar():
    fig = kvcache.plot_gpu_budget("llama-2-70b", 4096, 32)
    weights, kv = [p.get_height() for p in fig.axes[0].patches]
    assert kv == pytest.approx(42.94967296)
    assert weights == pytest.approx(MODELS["llama-2-70b"].param_count() * 2 / GB)


def test_tp_choices_fit_each_preset():
    assert kvcache.tp_choices("llama-2-13b") == (1, 2, 4, 8)  # 40 KV heads: 16 neither divides nor is a multiple
    assert kvcache.tp_choices("falcon-7b") == (1,)  # 71 query heads: no TP degree splits them whole
    assert kvcache.tp_choices("llama-2-70b") == (1, 2, 4, 8, 16)  # 8 KV heads, replicated at 16
    assert kvcache.tp_choices("deepseek-v3") == (1, 2, 4, 8, 16)  # MLA: 128 query heads, no KV-head rule
    for name in MODELS:
        for tp in kvcache.tp_choices(name):
            kvcache.describe_kv(name, "fp16", 4096, 1, tp)


def test_kv_explorer_controls_redraw():
    box = kvcache.kv_explorer()
    (model_dd, dtype_dd, tp_dd), ctx, batch, caption, image = (
        list(box.children[0].children), box.children[1], box.children[2], box.children[3], box.children[4])
    assert "42,949,672,960 B" in caption.value
    for control, value in ((ctx, 8192), (batch, 8), (dtype_dd, "fp8"), (tp_dd, 16), (model_dd, "falcon-7b")):
        before, text = image.value, caption.value
        control.value = value
        assert image.value != before and caption.value != text, control.description
    assert tuple(tp_dd.options) == (1,) and tp_dd.value == 1  # 71 query heads: only TP 1 splits them whole
    model_dd.value, tp_dd.value = "llama-2-70b", 16
    model_dd.value = "llama-2-13b"  # TP 16 does not fit its 40 KV heads: the TP choices shrink
    assert tuple(tp_dd.options) == (1, 2, 4, 8) and tp_dd.value == 8
    assert "llama-2-13b</b> (MHA 40/40), TP 8" in caption.value
