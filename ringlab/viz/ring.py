"""Pictures of the ring all-reduce schedule and its traffic, and a widget to step through it.

Everything drawn comes from the schedule data (:func:`ringlab.collectives.ring_all_reduce_schedule`)
and its symbolic replay, not from a separate description of the algorithm.
"""

from __future__ import annotations

import numpy as np

from ringlab.collectives import replay, ring_all_reduce_schedule

from ._controls import image as explorer_image
from ._controls import int_slider
from ._mpl import pyplot, show, widgets


def ring_state(world_size: int, step: int) -> dict:
    """What every rank holds before ``step`` of ring all-reduce and what moves during it.

    ``step`` counts from 0 over both phases (0 .. 2(N-1)); ``step = 2(N-1)`` is the final state.
    Returns ``{"phase", "phase_step", "contributions": (N, N) int array (rank, chunk) -> how many
    ranks' data the copy holds, "transfers": [(src, dst, chunk, reduce), ...]}``.
    Raises ValueError for a step outside 0 .. 2(N-1).
    """
    sched = ring_all_reduce_schedule(world_size)
    if not 0 <= step <= sched.num_steps:
        raise ValueError(f"step must be in 0..{sched.num_steps} for world_size={world_size}, got {step}")
    states = list(replay(sched))
    n = world_size
    phase = "reduce-scatter" if step < n - 1 else ("all-gather" if step < sched.num_steps else "done")
    return {
        "phase": phase,
        "phase_step": step if step < n - 1 else step - (n - 1),
        "contributions": states[step].sum(axis=2),
        "transfers": list(sched.steps[step]) if step < sched.num_steps else [],
    }


def draw_ring_step(world_size: int, step: int, ax=None):
    """Draw ranks x chunks before ``step``: shade = contributions held, arrows = this step's sends.

    Each row is a rank, each column a chunk; the number in a cell is how many ranks' data that
    copy already holds (N means finished). Red outline: the copy a rank sends to the next rank in
    this step; green dashed outline: the copy that receives it, marked ``+`` (added) or ``=``
    (stored). Returns the figure.
    """
    plt = pyplot()
    state = ring_state(world_size, step)
    n = world_size
    contrib = state["contributions"]
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.0 + 0.55 * n, 0.9 + 0.45 * n))
    else:
        fig = ax.figure
    ax.imshow(contrib, cmap="Blues", vmin=0, vmax=max(n, 1) * 1.25, aspect="equal")
    for r in range(n):
        for c in range(n):
            ax.text(c, r, str(contrib[r, c]), ha="center", va="center", fontsize=8,
                    color="white" if contrib[r, c] == n else "black")
    for src, dst, chunk, reduce in state["transfers"]:
        ax.add_patch(plt.Rectangle((chunk - 0.46, src - 0.46), 0.92, 0.92, fill=False, edgecolor="#cf222e", lw=2))
        ax.add_patch(plt.Rectangle((chunk - 0.38, dst - 0.38), 0.76, 0.76, fill=False, edgecolor="#1a7f37",
                                   lw=1.5, ls="--"))
        ax.text(chunk + 0.42, dst - 0.42, "+" if reduce else "=", color="#1a7f37", fontsize=9,
                fontweight="bold", ha="right", va="top")
    ax.set_xticks(range(n), [f"c{c}" for c in range(n)])
    ax.set_yticks(range(n), [f"rank {r}" for r in range(n)])
    ax.set_xlabel("chunk")
    title = (f"N={n}: {state['phase']} step {state['phase_step']}" if state["phase"] != "done"
             else f"N={n}: done, every copy holds all {n} contributions")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_traffic(world_sizes, bytes_sent_per_rank, message_bytes: int, ax=None):
    """Bytes sent per rank (min..max over ranks, measured) against 2(N-1)/N x M, for each world size.

    ``bytes_sent_per_rank`` is a sequence of int arrays, one per world size, as counted by the
    simulator (``res.traffic.bytes_sent``). Returns the figure.
    """
    plt = pyplot()
    sizes = np.asarray(list(world_sizes))
    lo = np.array([int(np.min(b)) for b in bytes_sent_per_rank]) / message_bytes
    hi = np.array([int(np.max(b)) for b in bytes_sent_per_rank]) / message_bytes
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
    else:
        fig = ax.figure
    grid = np.arange(1, sizes.max() + 1)
    ax.plot(grid, 2 * (grid - 1) / grid, color="0.4", lw=1, label="2(N-1)/N (lower bound)")
    ax.axhline(2, color="0.7", ls=":", lw=1, label="2 x M (limit)")
    ax.vlines(sizes, lo, hi, color="#cf222e", lw=3)
    ax.plot(sizes, hi, "o", color="#cf222e", ms=4, label="measured per rank (min..max)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("world size N (ranks)")
    ax.set_ylabel("bytes sent per rank / message bytes M")
    ax.set_ylim(0, 2.15)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(f"Ring all-reduce traffic, message M = {message_bytes:,} B", fontsize=10)
    fig.tight_layout()
    return fig


def ring_explorer(max_world_size: int = 12, world_size: int = 4):
    """Widget: world-size and step sliders over :func:`draw_ring_step`, plus the step's transfers in words.

    Returns an ``ipywidgets.VBox``; its ``children`` are the two sliders, a text line and an
    ``Image`` holding the figure as PNG. The callback only sets widget values: it neither prints
    nor displays, because output from a callback reaches the cell under nbval and breaks it.
    """
    w = widgets()
    n_slider = int_slider("world_size", world_size, 1, max_world_size)
    s_slider = int_slider("step", 0, 0, 2 * (world_size - 1))
    caption = w.HTML()
    image = explorer_image()

    def render(*_):
        s_slider.max = 2 * (n_slider.value - 1)
        state = ring_state(n_slider.value, s_slider.value)
        moves = ", ".join(f"{src}->{dst}: c{chunk} ({'add' if red else 'store'})"
                          for src, dst, chunk, red in state["transfers"])
        show(image, caption, draw_ring_step(n_slider.value, s_slider.value),
             f"<code>{state['phase']} step {state['phase_step']}: {moves or 'nothing moves'}</code>")

    n_slider.observe(render, names="value")
    s_slider.observe(render, names="value")
    render()
    return w.VBox([n_slider, s_slider, caption, image])
