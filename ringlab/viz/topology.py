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
from ringlab.topology import PRESETS, build_on_cluster, get_cluster, linear_time, link_loads

from ._mpl import pyplot, show, widgets

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


def plot_cluster_load(cluster, schedule, message_bytes: int, ax=None, nodes_shown: int = 4):
    """Heat map of every link's busy time for one run of ``schedule`` on ``cluster``: a row per link class
    and direction, a column per GPU / NIC port, nodes side by side (the first ``nodes_shown``)."""
    plt = pyplot()
    own = ax is None
    if own:
        _, ax = plt.subplots(figsize=(9, 3))
    busy = link_busy(cluster, link_loads(schedule, cluster, int(message_bytes)).bytes)
    rows = [k for k in busy if not k.startswith("xgmi")] + [k for k in busy if k.startswith("xgmi")]
    shown = min(cluster.nodes, nodes_shown)
    width = max(v.shape[1] for k, v in busy.items() if not k.startswith("xgmi")) if any(
        not k.startswith("xgmi") for k in busy) else cluster.gpus_per_node
    grid = np.full((len(rows), shown * (width + 1) - 1), np.nan)
    for i, k in enumerate(rows):
        v = busy[k]
        if k.startswith("xgmi"):  # G x G links per node: show each GPU's busiest outgoing link
            g = cluster.gpus_per_node
            v = v.reshape(cluster.nodes, g, g).max(axis=2)
        for n in range(shown):
            grid[i, n * (width + 1): n * (width + 1) + v.shape[1]] = v[n]
    im = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1)
    ax.set_yticks(range(len(rows)), [r.replace("xgmi tx", "xgmi (busiest out)") for r in rows], fontsize=8)
    ax.set_xticks([n * (width + 1) + (width - 1) / 2 for n in range(shown)], [f"node {n}" for n in range(shown)],
                  fontsize=8)
    ax.set_title(f"{schedule.algorithm} on {cluster.nodes} x {cluster.name}: link busy time / bottleneck's",
                 fontsize=9)
    ax.set_xlabel("in each node: GPU 0..G-1 (nvlink, pcie) or NIC rail 0..P-1 (nic), left to right", fontsize=8)
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
    from ringlab.topology import CLUSTER_ALGORITHMS

    c = get_cluster(topology, nodes)
    return [a for a in NCCL_ALGORITHMS if (collective, a) in CLUSTER_ALGORITHMS
            and CLUSTER_ALGORITHMS[(collective, a)].unavailable(c) is None]


def plot_busbw_vs_size(topology: str = "dgx-h100", node_counts=(1, 2, 8, 64), collective: str = "all_reduce",
                       ax=None, channels: int | None = None):
    """busbw against message size for each node count: NCCL's choice (the fastest algorithm at each size,
    solid) and the rings alone (dashed); the rings' line-rate busbw as a dotted line."""
    plt = pyplot()
    own = ax is None
    if own:
        _, ax = plt.subplots(figsize=(7, 4))
    colors = plt.cm.viridis(np.linspace(0, 0.85, len(node_counts)))
    for color, k in zip(colors, node_counts):
        curves = {a: busbw_curve(topology, k, collective, a, channels) for a in available(topology, k, collective)}
        best = np.max([c[0] for c in curves.values()], axis=0)
        ring, ring_line = curves["ring_channels"]
        ax.plot(SIZES, best / 1e9, color=color, lw=2, label=f"{k} node(s): best of {', '.join(curves)}")
        ax.plot(SIZES, ring / 1e9, color=color, lw=1, ls="--")
        ax.axhline(ring_line / 1e9, color=color, lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size S (bytes, nccl-tests' S)")
    ax.set_ylabel("busbw, GB/s (1e9 B/s)")
    ax.set_title(f"{collective} on {topology}, step model\nsolid: fastest algorithm; dashed: rings only; "
                 f"dotted: rings' line rate", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", framealpha=0.6)
    ax.grid(alpha=0.3)
    if own:
        ax.figure.tight_layout()
    return ax.figure


def describe_run(cluster, schedule, message_bytes: int) -> str:
    """HTML caption: time, busbw, ceiling, bottleneck, bytes per link class, share leaving the node."""
    from ringlab.topology import cost_of

    c = cost_of(schedule, cluster, int(message_bytes))
    per = ", ".join(f"{k} busiest {v['max'] / 1e9:.3f} GB" for k, v in c.bytes_per_class.items())
    return (f"<b>{html.escape(schedule.algorithm)}</b> on {html.escape(cluster.describe().split('. Source')[0])}<br>"
            f"S = {c.message_bytes:,} B: {c.seconds * 1e3:,.3f} ms, busbw {c.busbw / 1e9:.1f} GB/s "
            f"(line rate {c.line_rate_busbw / 1e9:.1f} GB/s); bottleneck <b>{html.escape(str(c.bottleneck))}</b>; "
            f"{c.inter_node_fraction:.1%} of the bytes sent leave their node; {html.escape(per)}")


def fabric_explorer(topology: str = "dgx-h100", nodes: int = 2, algorithm: str = "ring_channels",
                    channels: int = 8, size_log2: int = 30):
    """Widget: preset, nodes, algorithm, channels and message size over the link-load picture and the
    busbw curves for 1, 2, 8, 64 nodes. The callback only sets widget values (no printing, for nbval);
    an algorithm the cluster cannot run is named in the caption instead."""
    w = widgets()
    plt = pyplot()
    topo_dd = w.Dropdown(options=[n for n, c in PRESETS.items() if c.gpus_per_node <= 8], value=topology,
                         description="cluster")
    nodes_dd = w.Dropdown(options=[1, 2, 3, 4, 8], value=nodes, description="nodes")
    algo_dd = w.Dropdown(options=["ring", "ring_channels", "hierarchical", "tree_chains", "nvls", "nvls_tree", "sharp"],
                         value=algorithm, description="algorithm")
    chan = w.IntSlider(value=channels, min=1, max=16, description="channels")
    size = w.IntSlider(value=size_log2, min=10, max=34, description="log2 S")
    caption, image = w.HTML(), w.Image(format="png")

    def render(*_):
        cluster = get_cluster(topo_dd.value, nodes_dd.value)
        fig, (left, right) = plt.subplots(1, 2, figsize=(13, 3.8), gridspec_kw={"width_ratios": [1.2, 1]})
        try:
            sched = build_on_cluster("all_reduce", algo_dd.value, cluster, chan.value)
        except ValueError as exc:
            left.text(0.5, 0.5, str(exc), ha="center", va="center", wrap=True, fontsize=9)
            left.set_axis_off()
            text = html.escape(str(exc))
        else:
            plot_cluster_load(cluster, sched, 2**size.value, ax=left)
            text = describe_run(cluster, sched, 2**size.value)
        plot_busbw_vs_size(topo_dd.value, (1, 2, 8, 64), ax=right)
        fig.tight_layout()
        show(image, caption, fig, text)

    for control in (topo_dd, nodes_dd, algo_dd, chan, size):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([topo_dd, nodes_dd, algo_dd]), w.HBox([chan, size]), caption, image])
