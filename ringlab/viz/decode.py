"""Decode step time and throughput against batch size, with the SLA line, the memory wall, and
the circulating wrong model drawn beside the right one; plus a widget to explore them.

Numbers come from :func:`ringlab.calc.decode_step` (weights read once per step, KV of every
sequence, roofline of the whole step, card 07), :func:`ringlab.calc.max_batch_for_sla`
and, for the wrong model only, :func:`ringlab.calc.naive_linear_decode_time`.
"""

from __future__ import annotations

import math

import numpy as np

from ringlab.calc import (
    HARDWARE, MODELS, decode_step, get_hardware, get_model, max_batch_for_sla, naive_linear_decode_time,
)

from ._controls import dropdown, float_slider, selection_slider
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted

WRONG_LABEL = "circulating (wrong): batch x step(1), weights read per sequence"


def default_batch_sizes(max_batch: int = 2048) -> np.ndarray:
    """About 100 integer batch sizes spaced evenly on a log axis from 1 to ``max_batch`` (int64)."""
    return np.unique(np.round(np.geomspace(1, max_batch, 100)).astype(np.int64))


def plot_decode(model="llama-2-7b", hardware="a100-sxm-80gb", context_len: int = 4096, tpot_s: float = 0.05,
                batch_sizes=None, dtype: str = "bf16", kv_dtype: str | None = None, tp: int = 1, axes=None):
    """Two panels against batch size (log axis): decode step time (ms, log) and tokens/s.

    Left: the step time of :func:`~ringlab.calc.decode_step` with its two roofs (memory time =
    bytes / HBM bandwidth, compute time = FLOPs / dense peak) as thin lines, the wrong linear
    model of :func:`~ringlab.calc.naive_linear_decode_time` in red, the SLA ``tpot_s`` as a
    horizontal line. Right: tokens/s = batch / step time, right and wrong, and the compute
    ceiling peak / FLOPs per token. Both: batches whose weights + KV exceed 90 % of the
    datasheet memory are shaded (the memory wall) and the answer of
    :func:`~ringlab.calc.max_batch_for_sla` is starred. Arguments as ``decode_step``;
    ``batch_sizes`` default :func:`default_batch_sizes`. ``axes``: the two axes to draw on (an
    explorer's, emptied by the caller), a new 10.8 x 6 in figure otherwise. Returns the Figure; raises
    the calculators' ValueError/TypeError for bad arguments.
    """
    plt = pyplot()
    batch = default_batch_sizes() if batch_sizes is None else np.asarray(batch_sizes, dtype=np.int64)
    right = decode_step(model, hardware, batch, context_len, dtype, kv_dtype, tp)
    wrong_time, wrong_tokens = naive_linear_decode_time(model, hardware, batch, context_len, dtype, kv_dtype, tp)
    sla = max_batch_for_sla(model, hardware, context_len, tpot_s, dtype, kv_dtype, tp)
    wall = sla.memory_limit + 0.5  # first batch that does not fit is memory_limit + 1

    ax_t, ax_r = axes if axes is not None else decode_axes(plt.figure(figsize=(10.8, 6.0)))
    fig = ax_t.figure
    ms = 1e3
    ax_t.loglog(batch, right.step_time_s * ms, color="black", lw=2.2, label="step time (right model)")
    ax_t.loglog(batch, right.memory_time_s * ms, color="#1f77b4", lw=1, ls="--", label="memory roof: bytes / HBM BW")
    ax_t.loglog(batch, right.compute_time_s * ms, color="#ff7f0e", lw=1, ls="--", label="compute roof: FLOPs / peak")
    ax_t.loglog(batch, wrong_time * ms, color="#d62728", lw=1.6, ls="-.", label=WRONG_LABEL)
    ax_t.axhline(tpot_s * ms, color="#2ca02c", lw=1.4, label=f"SLA {tpot_s * ms:g} ms/token")
    top = 3 * max(float(np.max(right.step_time_s)), tpot_s) * ms
    ax_t.set_ylim(0.5 * min(float(np.min(right.step_time_s)), tpot_s) * ms, top)
    ax_t.set_ylabel("decode step time (ms) = time per output token")

    ax_r.loglog(batch, right.tokens_per_s, color="black", lw=2.2, label="tokens/s (right model)")
    ax_r.loglog(batch, wrong_tokens, color="#d62728", lw=1.6, ls="-.", label="circulating (wrong): flat")
    # Ceilings as batch grows: FLOPs per token fixed -> peak / FLOPs per token; KV bytes per token
    # fixed -> HBM BW / KV bytes per sequence (weights amortised away). The lower one is the roof.
    compute_ceiling = float(batch[0] / right.compute_time_s[0])
    kv_ceiling = get_hardware(hardware).hbm_bandwidth / right.kv_bytes_per_sequence
    ax_r.axhline(compute_ceiling, color="#ff7f0e", lw=1, ls="--",
                 label=f"compute ceiling: peak / FLOPs per token = {compute_ceiling:,.0f}")
    ax_r.axhline(kv_ceiling, color="#1f77b4", lw=1, ls="--",
                 label=f"KV ceiling: HBM BW / KV bytes per seq = {kv_ceiling:,.0f}")
    ax_r.set_ylim(0.5 * float(np.min(wrong_tokens)), 2 * max(compute_ceiling, kv_ceiling))
    ax_r.set_ylabel("tokens/s (all sequences)")

    for ax in (ax_t, ax_r):
        if wall < batch[-1]:
            ax.axvspan(max(wall, batch[0]), batch[-1], color="0.85", lw=0)
            ax.axvline(max(wall, batch[0]), color="0.4", lw=1)
            ax.text(max(wall, batch[0]) * 1.08, 0.03, "does not fit\n(memory wall)", transform=ax.get_xaxis_transform(),
                    fontsize=7, va="bottom", color="0.3")
        if sla.batch_size:
            y = sla.step.step_time_s * ms if ax is ax_t else sla.step.tokens_per_s
            ax.plot(sla.batch_size, y, "*", color="#2ca02c", ms=14, mec="black",
                    label=f"max batch {sla.batch_size} (bound by {sla.bound_by})")
        ax.set_xlim(batch[0], batch[-1])
        ax.set_xlabel("batch size (sequences decoding together)")
        ax.grid(True, which="major", alpha=0.3)
        # below the axes: inside, the legend covered the lines it names
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False)
    tp_text = f", tp={tp}" if tp > 1 else ""
    fig.suptitle(f"{get_model(model).name} on {right.hardware}{tp_text}, {context_len:,} tokens of context per "
                 f"sequence, weights {right.dtype}, KV {right.kv_dtype}, dense peak", fontsize=10)
    return fig


def decode_axes(fig) -> tuple:
    """:func:`plot_decode`'s two panels on ``fig`` (10.8 x 6 in), at fixed margins that leave room below
    each for its legend of up to 6 lines (no layout pass: an explorer redraws them quickly)."""
    grid = fig.add_gridspec(1, 2, left=0.065, right=0.985, bottom=0.32, top=0.93, wspace=0.17)
    return fig.add_subplot(grid[0]), fig.add_subplot(grid[1])


def naive_max_batch(model, hardware, context_len: int, tpot_s: float, dtype: str = "bf16",
                    kv_dtype: str | None = None, tp: int = 1) -> int:
    """The SLA answer the wrong linear model gives: floor(tpot_s / step_time(batch 1)), for comparison."""
    step1, _ = naive_linear_decode_time(model, hardware, 1, context_len, dtype, kv_dtype, tp)
    return math.floor(tpot_s / step1)


def _tp_options(model) -> list[int]:
    heads = get_model(model).num_attention_heads
    return [t for t in (1, 2, 4, 8) if heads % t == 0]


def decode_explorer(model: str = "llama-2-7b", hardware: str = "a100-sxm-80gb", context_len: int = 4096,
                    sla_ms: float = 50.0):
    """Widget over :func:`plot_decode`: model, hardware, context length, SLA (ms per token) and TP degree.

    Hardware choices are the presets with a bf16 peak and a scale-up link bandwidth (needed when
    tp > 1); TP choices are the divisors of the model's attention heads among 1, 2, 4, 8. The
    caption states the largest batch under the SLA, what binds it, and the (smaller) batch the
    circulating model would allow. Returns an ``ipywidgets.VBox`` ending in an ``Image``; the
    callback sets widget values only and never prints.
    """
    w = widgets()
    chips = [n for n, hw in HARDWARE.items() if hw.tflops_bf16 and hw.interconnect_bandwidth]
    model_dd = dropdown("model", list(MODELS), model)
    hw_dd = dropdown("hardware", chips, hardware)
    context = selection_slider("context", [2**i for i in range(7, 18)], context_len, "context_len")
    sla = float_slider("SLA (ms)", sla_ms, 5, 200, 1, "sla_ms")
    tp_dd = dropdown("tp", _tp_options(model), 1)
    caption = w.HTML()
    image = explorer_image()
    canvas = Canvas(10.8, 6.0)  # one figure, redrawn in place (see ._redraw)
    axes = decode_axes(canvas.fig)

    updating = []  # non-empty while the model callback rewrites tp's options (which fires tp's callback)

    def render(*_):
        if updating:
            return
        tpot = sla.value / 1e3
        args = (model_dd.value, hw_dd.value, context.value)
        res = max_batch_for_sla(*args, tpot, tp=tp_dd.value)
        naive = naive_max_batch(*args, tpot, tp=tp_dd.value)
        clear_plotted(*axes)
        plot_decode(*args, tpot, tp=tp_dd.value, axes=axes)
        show(image, caption, canvas,
             f"<code>largest batch: {res.batch_size} (bound by {res.bound_by}: latency allows "
             f"{res.latency_limit}, memory allows {res.memory_limit}); the circulating model would "
             f"allow {min(naive, res.memory_limit)}</code>")

    def new_model(_):
        updating.append(True)
        try:
            tp_dd.options = _tp_options(model_dd.value)  # falcon-7b's 71 heads allow tp=1 only
        finally:
            updating.clear()
        render()

    model_dd.observe(new_model, names="value")
    for control in (hw_dd, context, sla, tp_dd):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([w.VBox([model_dd, hw_dd, tp_dd]), w.VBox([context, sla])]), caption, image])
