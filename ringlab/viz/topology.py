"""Pictures of a cluster's per-link load, busbw against message size, and the fabric explorer.

Numbers come from :mod:`ringlab.topology`: bytes per link from routing every transfer of a schedule
(:func:`~ringlab.topology.link_loads`), times from the step model and the line-rate bound
(:func:`~ringlab.topology.linear_time`). Loads are drawn as the time each link is busy, as a share of
the busiest link's: 1.0 is the bottleneck.
"""

from __future__ import annotations

import html
from functools import lru_cache

import numpy as np

from ringlab.collectives.cost import bus_factor
from ringlab.topology import (
    CLUSTER_ALGORITHMS,
    PRESETS,
    build_on_cluster,
    cost_of,
    get_cluster,
    linear_time,
    link_loads,
)

from ._controls import dropdown, int_slider
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets

NCCL_ALGORITHMS = ("ring_channels", "tree_chains", "nvls", "nvls_tree")  # what NCCL's tuner picks among
SIZES = 2.0 ** np.arange(10, 35)  # 1 KiB .. 16 GiB


def link_busy(cluster, per_link: np.ndarray) -> dict[str, np.ndarray]:
    """Per class and direction, the busy time of every link relative to the busiest link of the run:
    ``{"nvlink tx": (nodes, gpus), "nic tx": (nodes, ports), ...}`` for the classes the cluster has."""
    links = cluster.links
    t = per_link / links.bandwidth
    top = t.max() if t.max() > 0 else 1.0
    out = {}
    for cls in dict.fromkeys(links.cls.tolist()):
        for d in ("tx", "rx"):
            ids = links.of_class(cls, d)
            if ids.size:
                out[f"{cls} {d}"] = (t[ids] / top).reshape(cluster.nodes, -1)
    return out


def plot_cluster_load(cluster, schedule, message_bytes: int, ax=None, nodes_shown: int = 4, colorbar: bool = True):
    """Heat map of every link's busy time for one run of ``schedule`` on ``cluster``: a row per link class
    and direction, a column per GPU / NIC port, nodes side by side (the first ``nodes_shown``). Values run
    from 0 to 1 on viridis; ``colorbar=False`` leaves the scale to the caller (an explorer draws it once)."""
    plt = pyplot()
    own = ax is None
    if own:
        _, ax = plt.subplots(figsize=(9, 3))
    busy = link_busy(cluster, link_loads(schedule, cluster, int(message_bytes)).bytes)
    pair = f"{cluster.links.pair_class} " if cluster.links.pair_class else None  # a mesh's G x G pair links
    is_pair = (lambda k: pair is not None and k.startswith(pair))
    rows = [k for k in busy if not is_pair(k)] + [k for k in busy if is_pair(k)]
    shown = min(cluster.nodes, nodes_shown)
    width = max(v.shape[1] for k, v in busy.items() if not is_pair(k)) if any(
        not is_pair(k) for k in busy) else cluster.gpus_per_node
    grid = np.full((len(rows), shown * (width + 1) - 1), np.nan)
    for i, k in enumerate(rows):
        v = busy[k]
        if is_pair(k):  # G x G links per node: show each GPU's busiest outgoing link
            g = cluster.gpus_per_node
            v = v.reshape(cluster.nodes, g, g).max(axis=2)
        for n in range(shown):
            grid[i, n * (width + 1): n * (width + 1) + v.shape[1]] = v[n]
    im = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1)
    ax.set_yticks(range(len(rows)), [f"{pair}(busiest out)" if is_pair(r) else r for r in rows], fontsize=8)
    ax.set_xticks([n * (width + 1) + (width - 1) / 2 for n in range(shown)], [f"node {n}" for n in range(shown)],
                  fontsize=8)
    ax.set_title(f"{schedule.algorithm} on {cluster.nodes} x {cluster.name}: link busy time / bottleneck's",
                 fontsize=9)
    ax.set_xlabel("in each node: GPU 0..G-1 (nvlink, pcie) or NIC rail 0..P-1 (nic)", fontsize=8)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.03)
    if own:
        ax.figure.tight_layout()
    return ax.figure


@lru_cache(maxsize=64)
def busbw_curve(topology: str, nodes: int, collective: str, algorithm: str,
                channels: int | None = None) -> tuple[np.ndarray, float]:
    """busbw (B/s) of ``algorithm`` at every size of :data:`SIZES` under the step model, and its line-rate
    busbw; cached (routing 512 ranks takes about a second)."""
    cluster = get_cluster(topology, nodes)
    sched = build_on_cluster(collective, algorithm, cluster, channels)
    a, b, b_line = linear_time(sched, cluster)
    factor = bus_factor(collective, cluster.world_size)
    return factor * SIZES / (a + b * SIZES), factor / b_line


def available(topology: str, nodes: int, collective: str = "all_reduce") -> list[str]:
    """The NCCL-like algorithms the preset can run at this node count."""
    c = get_cluster(topology, nodes)
    return [a for a in NCCL_ALGORITHMS if (collective, a) in CLUSTER_ALGORITHMS
            and CLUSTER_ALGORITHMS[(collective, a)].unavailable(c) is None]


def plot_busbw_vs_size(topology: str = "dgx-h100", node_counts=(1, 2, 8, 64), collective: str = "all_reduce",
                       ax=None, channels: int | None = None, highlight: int | None = None):
    """busbw against message size for each node count: NCCL's choice (the fastest algorithm at each size,
    solid) and the rings alone (dashed); the rings' line-rate busbw as a dotted line. The curves of
    ``highlight`` nodes are drawn thicker and named "chosen" in the legend."""
    plt = pyplot()
    own = ax is None
    if own:
        _, ax = plt.subplots(figsize=(7, 4))
    colors = plt.cm.viridis(np.linspace(0, 0.85, len(node_counts)))
    for color, k in zip(colors, node_counts):
        curves = {a: busbw_curve(topology, k, collective, a, channels) for a in available(topology, k, collective)}
        best = np.max([c[0] for c in curves.values()], axis=0)
        ring, ring_line = curves["ring_channels"]
        chosen = k == highlight
        ax.plot(SIZES, best / 1e9, color=color, lw=3.2 if chosen else 1.8,
                label=f"{k} node(s){', chosen' if chosen else ''}: best of {'/'.join(curves)}")
        ax.plot(SIZES, ring / 1e9, color=color, lw=1.6 if chosen else 1, ls="--")
        ax.axhline(ring_line / 1e9, color=color, lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size S (bytes, nccl-tests' S)")
    ax.set_ylabel("busbw, GB/s (1e9 B/s)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.6)  # the legend above the curves
    ax.set_title(f"{collective} on {topology}, step model\nsolid: fastest algorithm; dashed: rings; "
                 f"dotted: rings' line rate", fontsize=9)
    ax.legend(fontsize=8, loc="upper left", framealpha=0.6)
    ax.grid(alpha=0.3)
    if own:
        ax.figure.tight_layout()
    return ax.figure


def describe_run(cluster, schedule, message_bytes: int, cost=None) -> str:
    """HTML caption: time, busbw, ceiling, bottleneck, bytes per link class, share leaving the node.
    ``cost``: the run's :func:`ringlab.topology.cost_of`, when the caller has it already."""
    c = cost or cost_of(schedule, cluster, int(message_bytes))
    per = ", ".join(f"{k} busiest {v['max'] / 1e9:.3f} GB" for k, v in c.bytes_per_class.items())
    return (f"<b>{html.escape(schedule.algorithm)}</b> on {html.escape(cluster.describe().split('. Source')[0])}<br>"
            f"S = {c.message_bytes:,} B: {c.seconds * 1e3:,.3f} ms, busbw {c.busbw / 1e9:.1f} GB/s "
            f"(line rate {c.line_rate_busbw / 1e9:.1f} GB/s); bottleneck <b>{html.escape(str(c.bottleneck))}</b>; "
            f"{c.inter_node_fraction:.1%} of the bytes sent leave their node; {html.escape(per)}")


EXPLORER_NODES = (1, 2, 8)  # curves always on the explorer's busbw panel, beside the chosen node count


def fabric_explorer(topology: str = "dgx-h100", nodes: int = 2, algorithm: str = "ring_channels",
                    channels: int = 8, size_log2: int = 30):
    """Widget: preset, nodes, algorithm, channels and message size over the link-load picture and the
    busbw curves (NCCL's pick and the rings) for the chosen node count beside 1, 2 and 8 nodes, with
    this run's busbw marked at its size. The callback only sets widget values (no printing, for nbval);
    an algorithm the cluster cannot run is named in the caption instead. ValueError names an argument
    outside the controls' choices.

    One figure is kept and redrawn: the busbw curves only when the cluster or node count changes (the
    curves are cached per preset and node count), the heat map and this run's mark at every change.
    """
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    w = widgets()
    topo_dd = dropdown("cluster", [n for n, c in PRESETS.items() if c.gpus_per_node <= 8], topology, "topology")
    nodes_dd = dropdown("nodes", [1, 2, 3, 4, 8], nodes, width="140px")
    algo_dd = dropdown("algorithm", ["ring", "ring_channels", "hierarchical", "tree_chains", "nvls", "nvls_tree",
                                     "sharp"], algorithm)
    chan = int_slider("channels", channels, 1, 16)
    size = int_slider("log2 S (bytes)", size_log2, 10, 34, name="size_log2")
    caption, image = w.HTML(), explorer_image()
    canvas = Canvas(10.8, 4.1)
    # fixed margins: a layout pass per redraw would cost as much as the drawing
    outer = canvas.fig.add_gridspec(1, 2, width_ratios=[1.1, 1], left=0.1, right=0.985, bottom=0.14, top=0.86,
                                    wspace=0.3)
    heat = outer[0].subgridspec(1, 2, width_ratios=[1, 0.035], wspace=0.04)
    left, right = canvas.fig.add_subplot(heat[0]), canvas.fig.add_subplot(outer[1])
    canvas.fig.colorbar(ScalarMappable(Normalize(0, 1), "viridis"), cax=canvas.fig.add_subplot(heat[1]))
    drawn = {}  # what the busbw panel shows now: (preset, nodes) and this run's mark

    def busbw_panel(topo: str, k: int):
        if drawn.get("curves") != (topo, k):
            right.cla()
            plot_busbw_vs_size(topo, sorted({*EXPLORER_NODES, k}), ax=right, highlight=k)
            drawn["curves"] = (topo, k)
            drawn["mark"] = right.plot([], [], "o", ms=9, mfc="none", mec="#cf222e", mew=2)[0]
            drawn["size"] = right.axvline(SIZES[0], color="#cf222e", lw=1)
        return drawn["mark"], drawn["size"]

    def render(*_):
        cluster = get_cluster(topo_dd.value, nodes_dd.value)
        message = 2**size.value
        mark, at_size = busbw_panel(topo_dd.value, nodes_dd.value)
        left.cla()
        try:
            sched = build_on_cluster("all_reduce", algo_dd.value, cluster, chan.value)
        except ValueError as exc:
            left.text(0.5, 0.5, str(exc), ha="center", va="center", wrap=True, fontsize=10)
            left.set_axis_off()
            mark.set_data([], [])
            mark.set_label("_nolegend_")
            text = html.escape(str(exc))
        else:
            left.set_axis_on()
            cost = cost_of(sched, cluster, message)
            plot_cluster_load(cluster, sched, message, ax=left, colorbar=False)
            mark.set_data([message], [(cost.busbw or 0) / 1e9])
            mark.set_label(f"this run: {sched.algorithm}, {chan.value} channel(s)")
            text = describe_run(cluster, sched, message, cost)
        at_size.set_xdata([message, message])
        right.legend(fontsize=8, loc="upper left", framealpha=0.6)
        show(image, caption, canvas, text)

    for control in (topo_dd, nodes_dd, algo_dd, chan, size):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([topo_dd, nodes_dd, algo_dd]), w.HBox([chan, size]), caption, image])
