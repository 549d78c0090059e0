"""Figures and explorers for the serving notebooks: block tables, and a scheduler's queue/batch timeline.

Every function imports matplotlib / ipywidgets lazily; figures are returned, not shown.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ringlab.serving import BlockManager, SchedulerConfig, poisson_requests, simulate

from ._controls import image as explorer_image
from ._controls import int_slider
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted

_OWN, _SHARED, _COPIED, _EMPTY = "#d0d7de", "#54aeff", "#fd8c73", "#ffffff"


def fork_scenario(requests: int = 3, prompt_len: int = 37, shared_len: int = 24, n: int = 2, decode: int = 3,
                  block_size: int = 8, num_blocks: int = 256):
    """A :class:`BlockManager` after ``requests`` prompts of ``prompt_len`` tokens whose first ``shared_len``
    tokens are one system prompt, each forked into ``n`` samples that then decode ``decode`` tokens.

    Returns ``(manager, copied)``: ``copied`` is the set of blocks made by copy-on-write. Raises
    ValueError when ``shared_len > prompt_len`` or the pool is too small.
    """
    if shared_len > prompt_len:
        raise ValueError(f"shared_len={shared_len} must be <= prompt_len={prompt_len}")
    bm = BlockManager(num_blocks, block_size)
    system = list(range(shared_len))
    copied = set()
    for r in range(requests):
        prompt = system + [1_000 + 100 * r + i for i in range(prompt_len - shared_len)]
        bm.allocate((r, 0), prompt)
        for s in range(1, n):
            bm.fork((r, 0), (r, s))
    for step in range(decode):
        for r in range(requests):
            for s in range(n):
                copy = bm.append_token((r, s), 50_000 + 1_000 * r + 10 * s + step)
                if copy:
                    copied.add(copy[1])
    bm.take_pending_copies()
    return bm, copied


def plot_block_tables(bm: BlockManager, copied=frozenset(), title: str = "", ax=None):
    """One row per sequence: its block table as cells labelled with physical block ids. Blue: held by
    more than one table; orange: made by copy-on-write; grey: the sequence's own; the last cell shows
    how full the partial block is. Draws on ``ax`` when given (a figure sized to the tables otherwise);
    returns the figure."""
    plt = pyplot()
    seqs = bm.sequences()
    width = max((len(bm.block_table(s)) for s in seqs), default=1)
    own = ax is None
    if own:
        _, ax = plt.subplots(figsize=(min(2 + 0.62 * width, 14), 0.9 + 0.42 * len(seqs)))
    fig = ax.figure
    for row, seq in enumerate(seqs):
        table, length = bm.block_table(seq), len(bm.tokens(seq))
        for i, block in enumerate(table):
            colour = _COPIED if block in copied else _SHARED if bm.ref_count(block) > 1 else _OWN
            filled = min(bm.block_size, length - i * bm.block_size) / bm.block_size
            ax.add_patch(plt.Rectangle((i, row + 0.1), 0.95, 0.8, facecolor=_EMPTY, edgecolor="#57606a"))
            ax.add_patch(plt.Rectangle((i, row + 0.1), 0.95 * filled, 0.8, facecolor=colour, edgecolor="none"))
            ax.text(i + 0.475, row + 0.5, str(block), ha="center", va="center", fontsize=8)
    ax.set_xlim(-0.1, width + 0.1)
    ax.set_ylim(len(seqs), 0)
    ax.set_yticks([r + 0.5 for r in range(len(seqs))], [str(s) for s in seqs], fontsize=9)
    ax.set_xticks([i + 0.475 for i in range(width)], [str(i) for i in range(width)], fontsize=9)
    ax.set_xlabel("block table entry (tokens i*B .. i*B+B-1)")
    ax.set_ylabel("sequence (request, sample)")
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c) for c in (_SHARED, _COPIED, _OWN)]
    ax.legend(handles, ["shared", "copy-on-write copy", "own"], loc="upper left", bbox_to_anchor=(1.0, 1.0),
              fontsize=9, frameon=False)
    ax.set_title(title or f"{bm.num_used_blocks} of {bm.num_blocks} blocks in use, block size {bm.block_size}",
                 fontsize=10)
    if own:
        fig.tight_layout()
    return fig


def block_explorer():
    """Widget over :func:`fork_scenario`: requests, prompt and shared lengths, samples, decoded tokens.
    The caption compares the blocks in use with the closed form; returns an ``ipywidgets.VBox``."""
    w = widgets()
    requests = int_slider("requests", 3, 1, 6)
    prompt = int_slider("prompt", 37, 1, 64)
    shared = int_slider("shared", 24, 0, 64)
    n = int_slider("samples n", 2, 1, 4)
    decode = int_slider("decoded", 3, 0, 12)
    caption, image = w.HTML(), explorer_image()
    # one figure at a fixed size: up to 24 rows of up to 10 blocks fit it at a readable size
    canvas = Canvas(8.6, 4.8)
    ax = canvas.fig.add_subplot()
    canvas.fig.subplots_adjust(left=0.11, right=0.78, bottom=0.12, top=0.93)

    def render(*_):
        shared_len = min(shared.value, prompt.value)
        bm, copied = fork_scenario(requests.value, prompt.value, shared_len, n.value, decode.value)
        setup = (f"{requests.value} requests x {n.value} samples, prompts of {prompt.value} tokens of which "
                 f"{shared_len} shared, {decode.value} decoded, blocks of {bm.block_size}")
        summary = block_summary(bm, requests.value, prompt.value, shared_len, n.value, decode.value)
        ax.cla()
        plot_block_tables(bm, copied, ax=ax)
        show(image, caption, canvas, f"<code>{setup}<br>{summary}</code>")

    for control in (requests, prompt, shared, n, decode):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([w.VBox([requests, prompt, shared]), w.VBox([n, decode])]), caption, image])


def block_summary(bm: BlockManager, requests: int, prompt_len: int, shared_len: int, n: int, decode: int) -> str:
    """Blocks in use, hits and copies of :func:`fork_scenario`'s state against their closed forms (one line).

    With F = shared_len // B system blocks common to all requests and P = prompt_len: each request owns
    P // B - F full prompt blocks; before decoding also its partial block, after d decoded tokens each of
    its n samples owns ceil((P + d) / B) - P // B blocks (the partial block copied by n - 1 writers).
    """
    bs = bm.block_size
    common, full, partial = shared_len // bs, prompt_len // bs, int(prompt_len % bs != 0)
    if decode:
        per_request = full - common + n * (-(-(prompt_len + decode) // bs) - full)
        copies = requests * (n - 1) * partial
    else:
        per_request, copies = full - common + partial, 0
    expected = common + requests * per_request
    verdict = "equal" if (bm.num_used_blocks, bm.copies) == (expected, copies) else "DIFFERENT"
    return (f"{bm.num_used_blocks} blocks in use, closed form {expected}; copy-on-write copies {bm.copies}, "
            f"closed form {copies} ({verdict}); prefix-cache hits {bm.prefix_cache_hits} = "
            f"{requests - 1} requests x {common} system blocks")


def plot_timeline(trace, title: str = "", axes=None):
    """Queue lengths and batch composition against simulated time, with preemptions marked. ``axes``: the
    (top, bottom) pair to draw on, emptied by the caller (an explorer's); a new 9 x 4.6 in figure otherwise.
    Returns the figure."""
    s = trace.steps
    top, bottom = axes if axes is not None else _timeline_axes(pyplot().figure(figsize=(9, 4.6)))
    fig = top.figure
    t = s["end_s"] if len(s["end_s"]) else np.zeros(0)
    top.step(t, s["running"], where="post", label="running", color="#0969da")
    top.step(t, s["waiting"], where="post", label="waiting", color="#bf8700")
    if s["swapped"].any():
        top.step(t, s["swapped"], where="post", label="swapped", color="#8250df")
    times = [e.time_s for e in trace.events if e.kind == "preempt"]
    if times:
        top.plot(times, np.zeros(len(times)), "x", color="#cf222e", label=f"preemptions ({len(times)})")
    top.set_ylabel("requests")
    top.legend(fontsize=8, loc="upper left", frameon=False)
    bottom.step(t, s["decode_tokens"], where="post", label="decode tokens", color="#1a7f37")
    bottom.step(t, s["prefill_tokens"] + s["wasted_tokens"], where="post", label="prefill tokens", color="#9a6700",
                alpha=0.7)
    if s["wasted_tokens"].any():
        bottom.step(t, s["wasted_tokens"], where="post", label="prefill thrown away", color="#cf222e")
    bottom.set_yscale("symlog", linthresh=10)
    bottom.set_ylabel("tokens per step")
    bottom.set_xlabel("simulated time (s)")
    bottom.legend(fontsize=8, loc="upper left", frameon=False)
    top.set_title(title or trace.summary().splitlines()[0], fontsize=9)
    return fig


def _timeline_axes(fig) -> tuple:
    """:func:`plot_timeline`'s two panels sharing the time axis, at fixed margins for a 9 x 4.6 in figure
    (no layout pass: an explorer redraws them quickly)."""
    top, bottom = fig.subplots(2, 1, sharex=True)
    fig.subplots_adjust(left=0.08, right=0.985, bottom=0.11, top=0.93, hspace=0.1)
    return top, bottom


def load_sweep(rates, num_requests: int = 200, num_blocks: int = 1_200, config: SchedulerConfig | None = None,
               seed: int = 0, **trace_kwargs) -> dict:
    """Metrics of one seeded trace per arrival rate: a dict of numpy arrays (ttft_p50_s, ttft_p99_s,
    tpot_p50_s, tpot_p99_s, throughput_tokens_per_s, preemptions) keyed like :meth:`Trace.metrics`."""
    keys = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "throughput_tokens_per_s",
            "preemptions_recompute")
    rows = []
    for rate in rates:
        reqs = poisson_requests(num_requests, rate=float(rate), seed=seed, **trace_kwargs)
        rows.append(simulate(reqs, num_blocks=num_blocks, config=config).metrics())
    return {"rate": np.asarray(rates, dtype=float), **{k: np.array([r[k] for r in rows], dtype=float) for k in keys}}


def plot_latency_vs_load(sweep: dict, title: str = ""):
    """TTFT and TPOT (p50 and p99, ms) against the arrival rate, from :func:`load_sweep`."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    r = sweep["rate"]
    left.plot(r, sweep["ttft_p50_s"] * 1e3, "o-", label="TTFT p50")
    left.plot(r, sweep["ttft_p99_s"] * 1e3, "o--", label="TTFT p99")
    left.set_yscale("log")
    left.set_ylabel("ms")
    right.plot(r, sweep["tpot_p50_s"] * 1e3, "o-", color="#1a7f37", label="TPOT p50")
    right.plot(r, sweep["tpot_p99_s"] * 1e3, "o--", color="#1a7f37", label="TPOT p99")
    right.set_ylabel("ms per output token")
    for ax in (left, right):
        ax.set_xlabel("arrivals per second")
        ax.legend(fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def scheduler_explorer(num_requests: int = 150):
    """Widget: arrival rate, pool size, policy, preemption mode and chunked prefill over one seeded trace
    (Llama-2-7B on an H100); draws :func:`plot_timeline` and states the metrics. Returns a VBox."""
    w = widgets()
    rate = int_slider("rate /s", 20, 2, 60, 2)
    blocks = int_slider("blocks", 400, 100, 2_000, 50)
    policy = w.ToggleButtons(options=["fixed", "naive"], value="fixed", description="policy")
    mode = w.ToggleButtons(options=["recompute", "swap"], value="recompute", description="preempt")
    chunked = w.Checkbox(value=False, description="chunked prefill")
    caption, image = w.HTML(), explorer_image()
    canvas = Canvas(9, 4.6)  # one figure, redrawn in place (see ._redraw)
    axes = _timeline_axes(canvas.fig)

    @lru_cache(maxsize=32)  # a control moved back finds its trace: the simulation is most of a change's time
    def trace_of(rate_per_s: int, num_blocks: int, naive: bool, preemption: str, chunked_prefill: bool):
        settings = dict(preemption=preemption, chunked_prefill=chunked_prefill, max_num_batched_tokens=2048)
        config = SchedulerConfig.naive(**settings) if naive else SchedulerConfig(**settings)
        reqs = poisson_requests(num_requests, rate=float(rate_per_s), prompt_len=400, output_len=200, seed=0)
        return simulate(reqs, num_blocks=num_blocks, config=config)

    def render(*_):
        trace = trace_of(rate.value, blocks.value, policy.value == "naive", mode.value, chunked.value)
        lines = trace.summary().replace("\n", "<br>")
        setup = (f"policy {policy.value}, {mode.value} preemption, {'chunked' if chunked.value else 'whole'} "
                 f"prefill, {blocks.value} blocks, {rate.value} arrivals/s")
        clear_plotted(*axes)
        plot_timeline(trace, axes=axes)
        show(image, caption, canvas, f"<code>{setup}<br>{lines}</code>")

    for control in (rate, blocks, policy, mode, chunked):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([w.VBox([rate, blocks, chunked]), w.VBox([policy, mode])]), caption, image])
