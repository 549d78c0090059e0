"""Step timelines as Gantt charts: one row per (rank, stream), exposed communication marked, and an
explorer over DDP bucket size, FSDP prefetch and the cluster.

Timelines come from :mod:`ringlab.calc.training.timeline` (the simulator and its builders); this
module only draws them.
"""

from __future__ import annotations

import numpy as np

from ringlab.calc.training.step import PRESET_HARDWARE, resolve_cluster
from ringlab.calc.training.timeline import bucket_step, ddp_buckets, ddp_step, fsdp_step, model_layer_costs
from ringlab.topology import PRESETS

from ._controls import STYLE, dropdown, selection_slider
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets

PHASE_COLOURS = {"forward": "#4c78a8", "backward": "#f58518", "weight": "#54a24b", "optimizer": "#9d9d9d"}
COMM_COLOURS = ("#72b7b2", "#b279a2", "#eeca3b", "#9d755d", "#54a24b", "#ff9da6")
EXPOSED_COLOUR = "#d62728"


def _ms(seconds: float) -> float:
    return seconds * 1e3


def _rectangles(x0, x1, y0, y1) -> np.ndarray:
    """(n, 4, 2) corners of n axis-aligned rectangles, for one PolyCollection (one artist, not n)."""
    x0, x1, y0, y1 = (np.asarray(v, dtype=float) for v in (x0, x1, y0, y1))
    return np.stack([np.stack([x0, y0], -1), np.stack([x0, y1], -1), np.stack([x1, y1], -1),
                     np.stack([x1, y0], -1)], axis=1)


def draw_timeline(timeline, ranks=None, ax=None, title: str | None = None):
    """Gantt chart of a :class:`~ringlab.calc.training.timeline.Timeline`: x = milliseconds, one row per
    (rank, stream), compute coloured by phase (forward, backward, weight, optimizer), communication by
    label, and under each communication bar a red strip where it is exposed (no compute runs on the rank
    it counts on: its own, or a send's receiver). ``ranks``: which ranks to draw (default all). Returns
    the Figure; ValueError for a timeline without tasks or ranks it does not have.
    """
    plt = pyplot()
    from matplotlib.collections import PolyCollection

    ranks = list(timeline.ranks if ranks is None else ranks)
    if not ranks or not set(ranks) <= set(timeline.ranks):
        raise ValueError(f"ranks must be a non-empty subset of the timeline's ranks {list(timeline.ranks)}, "
                         f"got {ranks}")
    rows = [(r, s) for r in ranks for s in timeline.streams(r)]
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(11, 1.0 + 0.42 * len(rows)))
    else:
        fig = ax.figure
    labels = list(dict.fromkeys(t.label or t.collective for t in timeline.tasks if t.is_comm))
    comm_colour = {label: COMM_COLOURS[i % len(COMM_COLOURS)] for i, label in enumerate(labels)}
    row_of = {key: i for i, key in enumerate(rows)}
    exposed = {r: timeline.exposed_intervals(r) for r in timeline.ranks}
    bars, colours, strips = [], [], []  # (start, end, row) of each task drawn, its colour; exposed stretches
    for i, t in enumerate(timeline.tasks):
        if (t.rank, t.stream) not in row_of or t.duration == 0:
            continue
        y = row_of[(t.rank, t.stream)]
        bars.append((timeline.start[i], timeline.end[i], y))
        colours.append(comm_colour[t.label or t.collective] if t.is_comm else PHASE_COLOURS.get(t.label, "#4c78a8"))
        if t.is_comm:  # exposed parts: the stretches of [s, e] outside the rank's compute
            strips += [(a, b, y) for a, b in exposed[t.counted_on[0]][t.name]]
    # one collection per kind of bar: a few hundred separate artists took most of a redraw
    kinds = ((bars, -0.4, 0.4, {"facecolors": colours, "edgecolors": "white", "linewidths": 0.5}),
             (strips, 0.22, 0.4, {"facecolors": [EXPOSED_COLOUR] * len(strips), "edgecolors": "none"}))
    for rects, y0, y1, style in kinds:
        if rects:
            s, e, y = np.array(rects, dtype=float).T
            ax.add_collection(PolyCollection(_rectangles(_ms(s), _ms(e), y + y0, y + y1), **style), autolim=False)
    ax.set_yticks(range(len(rows)), [f"rank {r} {s}" if len(ranks) > 1 else s for r, s in rows], fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, _ms(timeline.step_time) * 1.01 or 1)
    ax.set_xlabel("time (ms)")
    r0 = ranks[0]
    ax.set_title(title or (f"step {_ms(timeline.step_time):.2f} ms: compute {_ms(timeline.compute_time(r0)):.2f} ms, "
                           f"exposed communication {_ms(timeline.exposed_total(r0)):.2f} ms (rank {r0})"), fontsize=10)
    phases = [p for p in PHASE_COLOURS if any(t.label == p and not t.is_comm and t.duration for t in timeline.tasks)]
    handles = [plt.Rectangle((0, 0), 1, 1, color=PHASE_COLOURS[p]) for p in phases]
    handles += [plt.Rectangle((0, 0), 1, 1, color=comm_colour[x]) for x in labels]
    handles.append(plt.Rectangle((0, 0), 1, 1, color=EXPOSED_COLOUR))
    ax.legend(handles, phases + labels + ["exposed"], fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5),
              frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    if own:
        fig.tight_layout()
    return fig


def compare_timelines(timelines: dict, rank: int = 0):
    """Several timelines stacked on one time axis (``{title: Timeline}``), one panel each. Returns the Figure."""
    plt = pyplot()
    heights = [len(t.streams(rank)) for t in timelines.values()]
    fig, axes = plt.subplots(len(timelines), 1, figsize=(11, 0.9 * len(timelines) + 0.45 * sum(heights)),
                             sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})
    longest = max(t.step_time for t in timelines.values())
    for ax, (name, t) in zip(axes[:, 0], timelines.items()):
        draw_timeline(t, [rank], ax=ax, title=f"{name}: step {_ms(t.step_time):.2f} ms, exposed "
                      f"{_ms(t.exposed_total(rank)):.2f} ms, sent {t.bytes_sent(rank) / 1e9:.2f} GB")
        ax.set_xlim(0, _ms(longest) * 1.01)
        ax.set_xlabel("")
    axes[-1, 0].set_xlabel("time (ms)")
    fig.tight_layout()
    return fig


def plot_exposed_sweep(buckets: int = 8, backward_s: float = 2e-3, max_allreduce_s: float = 4e-3, points: int = 41):
    """Exposed communication of ``buckets`` equal DDP buckets against each bucket's all_reduce time a, with
    ``backward_s`` (c) of backward per bucket: dots from the simulated timeline
    (:func:`~ringlab.calc.training.timeline.bucket_step`), the line a + (k - 1) max(0, a - c), and the
    two shortcuts (all of it exposed: k a; all hidden: 0). Returns the Figure."""
    plt = pyplot()
    a = np.linspace(0.0, max_allreduce_s, points)
    k, c = buckets, backward_s
    simulated = [bucket_step([c] * k, [x] * k).exposed_total() for x in a]
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    ax.plot(_ms(a), _ms(a * k), ":", color="#9d9d9d", label="sum of all all_reduces (k a)")
    ax.plot(_ms(a), _ms(a + (k - 1) * np.maximum(0.0, a - c)), "-", color="#4c78a8",
            label="a + (k - 1) max(0, a - c)")
    ax.plot(_ms(a), _ms(np.array(simulated)), "o", ms=3.5, color="#d62728", label="simulated timeline")
    ax.axvline(_ms(c), color="#f58518", lw=1, ls="--", label=f"a = c = {_ms(c):g} ms")
    ax.set_xlabel("all_reduce time per bucket a (ms)")
    ax.set_ylabel("exposed communication (ms)")
    ax.set_title(f"{k} equal buckets, {_ms(c):g} ms of backward each: hidden but the last while a <= c", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


STRATEGIES = ("ddp", "fsdp")
WORLD_SIZES = (2, 8, 64, 512)  # inside one node, one node, 8 and 64 nodes of 8 GPUs


def _topologies() -> tuple[str, ...]:
    """The ``ringlab.topology`` presets with a known GPU whose nodes every size of WORLD_SIZES fits in or fills
    (GB200 NVL72's 72-GPU rack takes 64 but not 512)."""
    return tuple(name for name, c in PRESETS.items() if name in PRESET_HARDWARE
                 and all(n <= c.gpus_per_node or n % c.gpus_per_node == 0 for n in WORLD_SIZES))


TOPOLOGIES = _topologies()
# DDP's bucket_cap_mb choices: 1-2.5-5 steps, so PyTorch's default of 25 is one of them
BUCKET_CAPS_MB = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000)


def _where(cluster) -> str:
    """The GPUs a world size occupies, in words: one NVLink domain, or nodes and their NICs."""
    if cluster.nodes == 1:
        return f"{cluster.world_size} GPUs in one node"
    return (f"{cluster.nodes} nodes x {cluster.gpus_per_node} GPUs, "
            f"{cluster.nics_per_node} x {cluster.nic_gbps:g} Gb/s NICs per node")


def timeline_explorer(model: str = "llama-3-8b", seq_len: int = 4096, micro_batch: int = 1, hardware: str | None = None,
                      efficiency: float = 0.5, bucket_cap_mb: float = 25, world_size: int = 64,
                      topology: str = "dgx-h100"):
    """Widget over one rank's step of ``model``: strategy (DDP or FSDP FULL_SHARD), DDP ``bucket_cap_mb``
    (:data:`BUCKET_CAPS_MB`, PyTorch's 25 MiB first), FSDP prefetch and streams (one NCCL stream, or FSDP2's
    two at full rate each), data-parallel ``world_size`` (:data:`WORLD_SIZES`) and the cluster ``topology``
    (:data:`TOPOLOGIES`, ``ringlab.topology`` presets).

    The ranks fill the cluster's nodes (:func:`ringlab.calc.training.step.resolve_cluster`): up to one node they
    share its NVLink domain, beyond it every collective runs as NCCL-style rings over all of a node's NICs
    (:func:`ringlab.calc.training.timeline.collective_time` on the Cluster), never as one link per rank.
    Layer costs from :func:`~ringlab.calc.training.timeline.model_layer_costs` (``efficiency`` x peak) on the
    cluster's own GPU (:data:`ringlab.calc.training.step.PRESET_HARDWARE`), or on ``hardware`` for every
    cluster when given; computed once per GPU. The caption gives the placement, step time, compute, exposed
    communication and bytes sent per rank. Returns an ``ipywidgets.VBox`` ending in an ``Image`` (one figure,
    redrawn in place); callbacks set widget values only and never print. ValueError names an argument outside
    the controls' choices.
    """
    w = widgets()
    costs: dict[str, tuple] = {}

    def layers_on(gpu: str):
        if gpu not in costs:
            costs[gpu] = model_layer_costs(model, seq_len, micro_batch, gpu, efficiency)
        return costs[gpu]

    strategy = w.ToggleButtons(options=STRATEGIES, value="ddp", description="strategy", style=STYLE)
    cap = selection_slider("bucket MiB", BUCKET_CAPS_MB, bucket_cap_mb, "bucket_cap_mb", width="420px")
    world = dropdown("world_size", WORLD_SIZES, world_size, width="180px")
    cluster_dd = dropdown("cluster", TOPOLOGIES, topology, "topology", width="240px")
    layers_on(hardware or PRESET_HARDWARE[topology])  # a bad model, size or GPU is refused before any drawing
    prefetch = w.Checkbox(value=True, description="FSDP prefetch", indent=False, layout=w.Layout(width="auto"))
    two_streams = w.Checkbox(value=False, description="FSDP: AG and RS on two streams",
                             indent=False, layout=w.Layout(width="auto"))
    caption, image = w.HTML(), explorer_image()
    canvas = Canvas(10.8, 2.5)
    ax = canvas.fig.add_subplot()
    canvas.fig.subplots_adjust(left=0.115, right=0.84, bottom=0.19, top=0.87)  # fixed: no layout pass per redraw

    def render(*_):
        ddp = strategy.value == "ddp"
        cap.disabled, prefetch.disabled, two_streams.disabled = not ddp, ddp, ddp
        gpu = hardware or PRESET_HARDWARE[cluster_dd.value]
        layers = layers_on(gpu)
        cluster = resolve_cluster(cluster_dd.value, world.value)
        if ddp:
            t = ddp_step(layers, world.value, cluster, bucket_cap_mb=cap.value)
            # the cap and the buckets it makes: below the size of one layer every cap gives the same buckets
            setting = f"bucket_cap_mb {cap.value:,.3g}: {len(ddp_buckets(layers, cap.value))} buckets | "
        else:
            setting = ""
            t = fsdp_step(layers, world.value, cluster, forward_prefetch=prefetch.value,
                          backward_prefetch=prefetch.value, streams="two" if two_streams.value else "one")
        ax.cla()
        draw_timeline(t, ax=ax)
        show(image, caption, canvas,
             f"<code>{model}, {seq_len} tokens x {micro_batch} per GPU on {gpu} at {efficiency:.0%} of peak | "
             f"{cluster_dd.value}: {_where(cluster)} | {setting}"
             f"step {_ms(t.step_time):.1f} ms, compute {_ms(t.compute_time()):.1f} ms, exposed "
             f"{_ms(t.exposed_total()):.1f} ms, sent {t.bytes_sent() / 1e9:.2f} GB per rank</code>")

    for control in (strategy, cap, world, cluster_dd, prefetch, two_streams):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([strategy, world, cluster_dd]), w.HBox([cap, prefetch, two_streams]), caption, image])


__all__ = ["compare_timelines", "draw_timeline", "plot_exposed_sweep", "timeline_explorer"]
