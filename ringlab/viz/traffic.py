"""Figures and the explorer of topic 21: production traces, prefix-cache hits, goodput.

``trace_summary(records)``             counts, mean/median tokens and the arrival rate of one trace
``plot_lengths(traces, axes)``         histograms of prompt and output tokens, one outline per trace
``plot_hit_curves(curves, ceiling)``   prefix-cache hit rate against pool size, one line per policy
``plot_chunk_sweep(rows, ...)``        p99 TTFT and TPOT against the chunk size of chunked prefill
``traffic_explorer(...)``              trace, load, chunk, SLA; policy and pool of the prefix cache
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ringlab.serving.blocks import POLICIES
from ringlab.serving.goodput import time_scaled
from ringlab.serving.prefix_hits import full_block_hashes, infinite_cache_hit_rate, prefix_hit_curve
from ringlab.serving.scheduler import SchedulerConfig, simulate
from ringlab.serving.traces import BUNDLED, MOONCAKE_HASH_BLOCK, load_trace, trace_path, trace_requests

from ._controls import dropdown, selection_slider
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted

TRACE_COLORS = {"azure-conv": "#4c72b0", "azure-code": "#dd8452", "mooncake-conv": "#55a868"}
POLICY_COLORS = {"vllm-v1": "#c44e52", "uncached-first": "#4c72b0"}
HIT_POOLS = (250, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000, 5500, 6000, 6500, 7000, 8000, 9000)
"""Pool sizes (blocks of 512 tokens) of the hit-rate curves: the smallest holds the excerpt's longest prompt
(235 full blocks), the largest the whole excerpt (8,190 full blocks)."""
HIT_TRACE = "mooncake-conv"
EXPLORER_RATES = (1, 2, 4, 8)
EXPLORER_CHUNKS = (256, 512, 1024, 2048, 4096)
EXPLORER_SLA_TTFT = (0.2, 0.5, 1.0, 2.0)
EXPLORER_SLA_TPOT = 0.05
EXPLORER_LIMIT = {"mooncake-conv": 60}
"""Requests the explorer replays per trace (the rest: all 300): Mooncake's prompts average 14k tokens, so
its excerpt is cut to keep a redraw near a second."""
EXPLORER_MODEL, EXPLORER_HARDWARE, EXPLORER_BLOCKS = "llama-3-8b", "h100-sxm", 4096


def trace_summary(records) -> dict:
    """``requests``, ``input_mean``/``input_median``/``output_mean``/``output_median`` (tokens) and
    ``rate_per_s`` ((count - 1) / span of arrivals; None for one request) of a list of
    :class:`~ringlab.serving.traces.TraceRequest`. ValueError for an empty list."""
    if not records:
        raise ValueError("records must hold at least one request, got none")
    inp = np.array([r.input_tokens for r in records], dtype=float)
    out = np.array([r.output_tokens for r in records], dtype=float)
    span = records[-1].arrival_s - records[0].arrival_s
    return dict(requests=len(records), input_mean=float(inp.mean()), input_median=float(np.median(inp)),
                output_mean=float(out.mean()), output_median=float(np.median(out)),
                rate_per_s=(len(records) - 1) / span if span > 0 else None)


def plot_lengths(traces: dict, axes=None):
    """Two panels: prompt tokens and output tokens of each trace (``{name: records}``), as step histograms
    on log-spaced bins (lengths span 1 to 10^5); returns the two axes."""
    if axes is None:
        axes = pyplot().subplots(1, 2, figsize=(10.5, 3.4))[1]
    for ax, field, label in ((axes[0], "input_tokens", "prompt (input) tokens"),
                             (axes[1], "output_tokens", "output tokens")):
        values = {name: np.array([getattr(r, field) for r in recs]) for name, recs in traces.items()}
        top = max(int(v.max()) for v in values.values())
        bins = np.logspace(0, np.log10(top) + 0.05, 40)
        for name, v in values.items():
            ax.hist(v, bins=bins, histtype="step", linewidth=1.6, color=TRACE_COLORS.get(name), label=name)
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("requests")
    axes[0].legend(fontsize=8, frameon=False, loc="upper left")
    return axes


def plot_hit_curves(curves: dict, ceiling: float, ax=None, mark: tuple | None = None):
    """Hit rate (%) against pool size: one line per policy (``{policy: {pool: rate}}``), the never-evicting
    ``ceiling`` dashed, and ``mark`` = (policy, pool) circled; returns the axes."""
    if ax is None:
        ax = pyplot().subplots(figsize=(7, 3.6))[1]
    for policy, curve in curves.items():
        ax.plot(list(curve), [100 * r for r in curve.values()], marker="o", markersize=3,
                color=POLICY_COLORS.get(policy), label=policy)
    pools = [p for curve in curves.values() for p in curve]
    ax.axhline(100 * ceiling, color="grey", linestyle="--", linewidth=1,
               label=f"infinite cache {100 * ceiling:.2f}%")
    if mark is not None and mark[1] in curves.get(mark[0], {}):
        ax.plot([mark[1]], [100 * curves[mark[0]][mark[1]]], "o", markersize=11, markerfacecolor="none",
                color="black")
    ax.set_xlim(0, max(pools) * 1.02)
    ax.set_ylim(0, 100 * ceiling * 1.25 + 0.5)
    ax.set_xlabel(f"pool size (blocks of {MOONCAKE_HASH_BLOCK} tokens)")
    ax.set_ylabel("prefix-cache hit rate (%)")
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return ax


def plot_chunk_sweep(rows: list[dict], sla_ttft: float, sla_tpot: float, axes=None, title: str = ""):
    """p99 TTFT (left) and p99 TPOT (right) in ms against the chunk size, from
    :func:`~ringlab.serving.goodput.chunk_sweep`'s rows, the SLA limits as dashed lines; returns the axes."""
    if axes is None:
        axes = pyplot().subplots(1, 2, figsize=(10.5, 3.3))[1]
    chunks = [r["max_num_batched_tokens"] for r in rows]
    for ax, key, limit, label in ((axes[0], "ttft_p99_s", sla_ttft, "p99 TTFT (ms)"),
                                  (axes[1], "tpot_p99_s", sla_tpot, "p99 TPOT (ms)")):
        ys = [np.nan if r[key] is None else 1e3 * r[key] for r in rows]
        colors = ["#55a868" if r["meets_p99"] else "#c44e52" for r in rows]
        ax.plot(chunks, ys, color="#4c72b0", zorder=1)
        ax.scatter(chunks, ys, c=colors, zorder=2)
        ax.axhline(1e3 * limit, color="grey", linestyle="--", linewidth=1, label=f"SLA {1e3 * limit:g} ms")
        ax.set_xscale("log", base=2)
        ax.set_xticks(chunks, [f"{c:,}" for c in chunks])
        ax.set_xlabel("chunk size (max_num_batched_tokens)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, frameon=False)
    if title:
        axes[0].figure.suptitle(title, fontsize=10)
    return axes


@lru_cache(maxsize=4)
def _hit_data(policy: str) -> tuple[dict, float]:
    hashes = full_block_hashes(load_trace(trace_path(HIT_TRACE)))
    return prefix_hit_curve(hashes, HIT_POOLS, policy), infinite_cache_hit_rate(hashes)


@lru_cache(maxsize=8)
def _requests(trace: str) -> tuple:
    records = load_trace(trace_path(trace), limit=EXPLORER_LIMIT.get(trace))
    return tuple(trace_requests(records)), trace_summary(records)["rate_per_s"]


@lru_cache(maxsize=64)
def _run(trace: str, scale: int, chunk: int):
    base, rate = _requests(trace)
    requests = time_scaled(list(base))(rate * scale)
    config = SchedulerConfig(chunked_prefill=True, max_num_batched_tokens=chunk)
    return simulate(requests, EXPLORER_MODEL, EXPLORER_HARDWARE, EXPLORER_BLOCKS, config=config), rate * scale


def _draw_ttft(ax, trace, sla_ttft: float) -> None:
    done = [r for r in trace.requests if r["ttft_s"] is not None]
    ax.scatter([r["arrival_s"] for r in done], [r["ttft_s"] for r in done], s=8,
               c=["#55a868" if r["ttft_s"] <= sla_ttft else "#c44e52" for r in done])
    ax.axhline(sla_ttft, color="grey", linestyle="--", linewidth=1)
    ax.set_yscale("log")
    ttfts = [r["ttft_s"] for r in done] or [sla_ttft]
    ax.set_ylim(min(min(ttfts), sla_ttft) / 1.5, max(max(ttfts), sla_ttft) * 2)  # the SLA line always inside
    ax.set_xlabel("arrival (s)")
    ax.set_ylabel("TTFT (s)")
    ax.set_title(f"each request's TTFT; dashed: the {sla_ttft:g} s SLA", fontsize=10)


def traffic_explorer(trace: str = "azure-conv", rate_scale: int = 1, chunk: int = 512, sla_ttft: float = 0.5,
                     policy: str = "vllm-v1", pool: int = 2000):
    """Widget: left, each request's TTFT when ``trace`` (a name of
    :data:`~ringlab.serving.traces.BUNDLED`) arrives ``rate_scale`` times faster than recorded, served by
    Llama-3-8B on one H100 with chunked prefill at ``chunk`` tokens per step, against ``sla_ttft`` (seconds;
    the TPOT limit is 50 ms); the caption gives goodput and the p99s. Right: the prefix-cache hit rate of the
    Mooncake excerpt (the only one with block hashes) for ``policy`` against pool size, ``pool`` circled.
    Returns an ``ipywidgets.VBox``; ValueError naming an argument outside its controls' values."""
    w = widgets()
    trace_dd = dropdown("trace", tuple(BUNDLED), trace, name="trace", width="230px")
    rate_sl = selection_slider("x recorded rate", EXPLORER_RATES, rate_scale, name="rate_scale", width="300px")
    chunk_dd = dropdown("chunk", EXPLORER_CHUNKS, chunk, name="chunk", width="150px")
    sla_dd = dropdown("TTFT SLA (s)", EXPLORER_SLA_TTFT, sla_ttft, name="sla_ttft", width="170px")
    policy_dd = dropdown("policy", POLICIES, policy, name="policy", width="230px")
    pool_sl = selection_slider("pool (blocks)", HIT_POOLS, pool, name="pool", width="360px")
    caption, image = w.HTML(), explorer_image()
    canvas = Canvas(10.8, 3.8)
    left = canvas.fig.add_axes([0.07, 0.14, 0.42, 0.78])
    right = canvas.fig.add_axes([0.58, 0.14, 0.40, 0.78])

    def render(*_):
        run, rate = _run(trace_dd.value, rate_sl.value, chunk_dd.value)
        m = run.metrics(sla_ttft=sla_dd.value, sla_tpot=EXPLORER_SLA_TPOT)
        curve, ceiling = _hit_data(policy_dd.value)
        clear_plotted(left, right)
        _draw_ttft(left, run, sla_dd.value)
        plot_hit_curves({policy_dd.value: curve}, ceiling, right, mark=(policy_dd.value, pool_sl.value))
        p99 = "none finished" if m["ttft_p99_s"] is None else (
            f"p99 TTFT {m['ttft_p99_s']:.3f} s, p99 TPOT {1e3 * (m['tpot_p99_s'] or 0):.1f} ms")
        rejected = f" ({m['rejected']} rejected: larger than the pool)" if m["rejected"] else ""
        text = (f"<b>{trace_dd.value}</b>, {m['requests']} requests at {rate:.2f}/s, chunk {chunk_dd.value}: "
                f"{m['finished']} finished{rejected}, {p99}; goodput {m['goodput_requests_per_s'] or 0:.2f} requests/s, "
                f"{m['sla_attainment']:.0%} within TTFT {sla_dd.value:g} s and TPOT 50 ms.<br>"
                f"Prefix cache ({HIT_TRACE}, {policy_dd.value}), {pool_sl.value:,} blocks: hit rate "
                f"{curve[pool_sl.value]:.2%} of a {ceiling:.2%} ceiling.")
        show(image, caption, canvas, text)

    for control in (trace_dd, rate_sl, chunk_dd, sla_dd, policy_dd, pool_sl):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([trace_dd, rate_sl, chunk_dd, sla_dd]), w.HBox([policy_dd, pool_sl]), caption, image])
