"""Figures of NCCL's own tuning model: what it picks over message size and node count, and what forcing
``NCCL_PROTO`` / ``NCCL_ALGO`` costs (:mod:`ringlab.nccl.tuning`)."""

from __future__ import annotations

import numpy as np

from ringlab.nccl.tuning import choose, comm_for_cluster, tune
from ringlab.topology import get_cluster

from ._mpl import pyplot

DEFAULT_SIZES = tuple(1 << k for k in range(10, 33))  # 1 KiB .. 4 GiB
DEFAULT_NODES = (1, 2, 4, 8, 16, 32, 64)
FORCED = ({"NCCL_PROTO": "Simple"}, {"NCCL_PROTO": "LL"}, {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"})


def choice_map(preset: str = "dgx-h100", version: str = "2.30", collective: str = "all_reduce",
               sizes=DEFAULT_SIZES, nodes=DEFAULT_NODES, env: dict | None = None) -> tuple[list[str], np.ndarray]:
    """NCCL's ``ALGO/PROTO`` label for each (node count, size): ``(labels, index)`` with ``index[i, j]`` the
    label of ``nodes[i]`` x ``sizes[j]`` in ``labels`` (int array of shape (len(nodes), len(sizes)))."""
    labels: list[str] = []
    index = np.zeros((len(nodes), len(sizes)), dtype=np.int64)
    for i, n in enumerate(nodes):
        table = tune(comm_for_cluster(get_cluster(preset, n), version, env).comm, version)
        for j, s in enumerate(sizes):
            label = choose(table, collective, s).label
            if label not in labels:
                labels.append(label)
            index[i, j] = labels.index(label)
    return labels, index


def forcing_cost(preset: str = "dgx-h100", nodes: int = 2, version: str = "2.30", collective: str = "all_reduce",
                 sizes=DEFAULT_SIZES, forced=FORCED) -> dict:
    """Predicted time with each environment of ``forced`` over the default choice's, per size:
    ``{"NCCL_PROTO=Simple": array of len(sizes), ...}`` (1 where the forced choice is NCCL's own)."""
    cluster = get_cluster(preset, nodes)
    base = tune(comm_for_cluster(cluster, version).comm, version)
    default = np.array([choose(base, collective, s).time_us for s in sizes])
    out = {}
    for env in forced:
        table = tune(comm_for_cluster(cluster, version, env).comm, version)
        name = " ".join(f"{k}={v}" for k, v in env.items())
        out[name] = np.array([choose(table, collective, s).time_us for s in sizes]) / default
    return out


def plot_choice_map(preset: str = "dgx-h100", version: str = "2.30", collective: str = "all_reduce",
                    sizes=DEFAULT_SIZES, nodes=DEFAULT_NODES, forced_nodes: int = 2):
    """Two panels: the algorithm/protocol NCCL ``version`` picks on ``preset`` over size (x, log2) and node
    count (y), and the slowdown of forcing a protocol or an algorithm on ``forced_nodes`` nodes. Returns the Figure."""
    from matplotlib.colors import ListedColormap

    plt = pyplot()
    labels, index = choice_map(preset, version, collective, sizes, nodes)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [1.25, 1]})
    colours = [f"C{i % 10}" for i in range(len(labels))]
    ax.imshow(index, aspect="auto", origin="lower", cmap=ListedColormap(colours), vmin=-0.5,
              vmax=len(labels) - 0.5, interpolation="nearest")
    ax.set_xticks(range(0, len(sizes), 2), [_size(s) for s in sizes[::2]], rotation=60, fontsize=8)
    ax.set_yticks(range(len(nodes)), [str(n) for n in nodes])
    ax.set_xlabel("message size")
    ax.set_ylabel(f"{preset} nodes")
    ax.set_title(f"NCCL {version}'s {collective} choice (estimated graphs)", fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours]
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    for name, ratio in forcing_cost(preset, forced_nodes, version, collective, sizes).items():
        bx.plot(sizes, ratio, "o-", ms=3, label=name)
    bx.axhline(1.0, color="k", lw=0.8)
    bx.set_xscale("log", base=2)
    bx.set_yscale("log", base=2)
    bx.set_xlabel("message size (bytes)")
    bx.set_ylabel("predicted time / NCCL's default choice")
    bx.set_title(f"forcing a protocol or algorithm, {forced_nodes} nodes", fontsize=10)
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"
