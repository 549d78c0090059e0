"""Figures and an explorer for data-parallel gradient traffic (DDP, ZeRO, FSDP) and per-GPU memory.

Every number comes from :func:`ringlab.calc.grad_comm_bytes` (bytes each rank sends per optimizer
step, per collective, and per-GPU model-state memory); times come from the cluster model of
:mod:`ringlab.topology` (NCCL-style rings on a preset's NVLink domains and NIC rails,
:meth:`~ringlab.calc.GradComm.time_on_cluster`). Byte axes are in decimal GB (1e9 B) on the left and
binary GiB (2**30 B) on the right.
"""

from __future__ import annotations

import html

import numpy as np

from ringlab.calc import GB, MODELS, GiB, ModelConfig, format_bytes, get_model, grad_comm_bytes
from ringlab.validation import positive_int
from ringlab.topology import PRESETS, get_cluster
from ringlab.topology.timing import group_cluster

from ._controls import dropdown, selection_slider
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted

STRATEGIES = ("ddp", "zero1", "zero2", "fsdp_shard_grad_op", "fsdp_full_shard", "hybrid_shard")
GPUS_PER_NODE = 8  # hybrid_shard's shard group, and where a flat ring starts crossing nodes
TOPOLOGIES = tuple(name for name, c in PRESETS.items() if c.gpus_per_node == GPUS_PER_NODE)
P2_PARAMS = 7_000_000_000
WORLD_SIZES = tuple(2**k for k in range(11))  # 1 .. 1024
_COLORS = {"ddp": "#0969da", "zero1": "#0969da", "zero2": "#1a7f37", "fsdp_shard_grad_op": "#1a7f37",
           "fsdp_full_shard": "#cf222e", "hybrid_shard": "#8250df"}
_STYLES = {"ddp": "-", "zero1": ":", "zero2": "-", "fsdp_shard_grad_op": ":", "fsdp_full_shard": "-",
           "hybrid_shard": "--"}


def model_params(model) -> tuple[int, str]:
    """``(n_params, label)`` for a preset name / ``ModelConfig`` (its ``param_count()``) or a plain count."""
    if isinstance(model, (str, ModelConfig)):
        cfg = get_model(model)
        return cfg.param_count(), cfg.name
    n = positive_int(model, "model")
    return n, f"{n / 1e9:g}e9 params"


def strategy_comm(strategy: str, n_params: int, world_size: int, dtype: str = "bf16"):
    """``grad_comm_bytes`` with hybrid_shard's ``gpus_per_node = min(8, world_size)`` filled in."""
    gpn = min(GPUS_PER_NODE, world_size) if strategy == "hybrid_shard" else None
    return grad_comm_bytes(strategy, n_params, world_size, dtype=dtype, gpus_per_node=gpn)


def traffic_curves(model=P2_PARAMS, strategies=STRATEGIES, world_sizes=WORLD_SIZES, dtype: str = "bf16"
                   ) -> dict[str, np.ndarray]:
    """Bytes each rank sends per optimizer step: ``{strategy: int64 array over world_sizes}``."""
    n_params, _ = model_params(model)
    return {s: np.array([strategy_comm(s, n_params, n, dtype).bytes_sent_per_rank for n in world_sizes],
                        dtype=np.int64) for s in strategies}


GIB_LABEL = "GiB (2^30 B)"


def gib_axis(ax, log: bool = False):
    """Right-hand axis in GiB mirroring a left-hand axis in GB; the one ``ax`` has already, when an explorer
    redraws on the same axes (a new one would stack on it and build its ticks again)."""
    sec = next((c for c in ax.child_axes if c.get_ylabel() == GIB_LABEL), None)
    if sec is None:
        sec = ax.secondary_yaxis("right", functions=(lambda gb: gb * GB / GiB, lambda gib: gib * GiB / GB))
        sec.set_ylabel(GIB_LABEL)
    if log:
        sec.set_yscale("log")
    return sec


def plot_traffic_vs_world_size(model=P2_PARAMS, strategies=STRATEGIES, world_sizes=WORLD_SIZES, dtype: str = "bf16",
                               highlight: str | None = None, mark: int | None = None, ax=None):
    """Bytes each rank sends per optimizer step against world size N, one line per strategy.

    Strategies with identical traffic (ddp and zero1; zero2 and fsdp_shard_grad_op without gradient
    accumulation) share one line and one legend entry. Dotted lines mark 2 x M and 3 x M, the limits of
    2(N-1)/N x M and 3(N-1)/N x M (M = one full copy of the parameters in ``dtype``).
    ``highlight`` draws that strategy thicker; ``mark`` puts a dot at that world size on it.
    Returns the figure. Raises ValueError for unknown names (from ``ringlab.calc``).
    """
    plt = pyplot()
    n_params, label = model_params(model)
    sizes = np.asarray(world_sizes)
    curves = traffic_curves(n_params, strategies, sizes, dtype)
    message = strategy_comm("ddp", n_params, 1, dtype).message_bytes
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
    else:
        fig = ax.figure
    drawn: list[tuple[np.ndarray, list[str]]] = []
    for s, y in curves.items():
        same = next((names for other, names in drawn if np.array_equal(other, y)), None)
        if same is not None:
            same.append(s)
        else:
            drawn.append((y, [s]))
    for y, names in drawn:
        lead = names[0]
        thick = highlight in names
        ax.plot(sizes, y / GB, _STYLES[lead], color=_COLORS[lead], lw=2.6 if thick else 1.4,
                marker="o", ms=3, label=" = ".join(names))
        if thick and mark is not None and mark in sizes:
            ax.plot([mark], [y[list(sizes).index(mark)] / GB], "o", ms=9, mfc="none", mec="black", mew=1.5)
    for k in (2, 3):
        ax.axhline(k * message / GB, color="0.6", ls=":", lw=1)
        ax.text(sizes[0], k * message / GB, f" {k} x M", va="bottom", fontsize=8, color="0.35")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("world size N (data-parallel ranks)")
    ax.set_ylabel("sent per rank per step, GB (1e9 B)")
    ax.set_ylim(0, 3.35 * message / GB)
    gib_axis(ax)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"{label}, {dtype}: M = {message / GB:.2f} GB = {message / GiB:.2f} GiB", fontsize=10)
    if own:
        fig.tight_layout()
    return fig


def plot_memory_per_gpu(model=P2_PARAMS, world_size: int = 64, strategies=STRATEGIES, dtype: str = "bf16",
                        highlight: str | None = None, ax=None):
    """Stacked bars: per-GPU bytes of parameters, gradients and optimizer states for each strategy.

    Mixed-precision Adam as in the ZeRO paper (2 + 2 + 12 bytes per parameter for bf16/fp16), from
    ``GradComm.memory``; activations and FSDP's one unsharded unit in flight are not included.
    Returns the figure.
    """
    plt = pyplot()
    n_params, label = model_params(model)
    mems = [strategy_comm(s, n_params, world_size, dtype).memory for s in strategies]
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
    else:
        fig = ax.figure
    x = np.arange(len(strategies))
    bottom = np.zeros(len(strategies))
    for part, color in (("params", "#0969da"), ("grads", "#1a7f37"), ("optimizer_states", "#bf8700")):
        values = np.array([getattr(m, part) for m in mems]) / GB
        ax.bar(x, values, bottom=bottom, color=color, label=part.replace("_", " "))
        bottom += values
    for i, (s, total) in enumerate(zip(strategies, bottom)):
        chosen = s == highlight
        if chosen:
            ax.bar(i, total, fill=False, edgecolor="black", lw=2)
        ax.text(i, total, f"{total:,.1f}", ha="center", va="bottom", fontsize=7,
                fontweight="bold" if chosen else "normal")
    ax.set_xticks(x, [s.replace("fsdp_", "fsdp\n") for s in strategies], fontsize=7)
    ax.set_ylabel("model states per GPU, GB (1e9 B)")
    ax.set_ylim(0, bottom.max() * 1.15)
    gib_axis(ax)
    ax.legend(fontsize=7)
    ax.set_title(f"{label}, N = {world_size}: memory per GPU", fontsize=10)
    if own:
        fig.tight_layout()
    return fig


def cluster_for(world_size: int, topology: str = "dgx-h100"):
    """The part of preset ``topology`` (8 GPUs per node) that ``world_size`` ranks occupy: some GPUs of one
    node, or ``world_size / 8`` whole nodes."""
    n = positive_int(world_size, "world_size")
    return group_cluster(get_cluster(topology, max(1, -(-n // GPUS_PER_NODE))), n)


def comm_time(comm, topology: str = "dgx-h100") -> float:
    """Seconds of gradient communication per step on ``comm.world_size`` GPUs of ``topology`` (no overlap).

    :meth:`~ringlab.calc.GradComm.time_on_cluster`: world-wide collectives run as NCCL-style rings whose
    channels leave each node on all its NICs; hybrid_shard's run inside a node, and its replicas'
    all_reduce on each GPU's own rail.
    """
    return comm.time_on_cluster(cluster_for(comm.world_size, topology))


def describe_comm(model, strategy: str, world_size: int, topology: str = "dgx-h100", dtype: str = "bf16") -> str:
    """HTML caption: each collective's bytes per rank (GB and GiB), total vs DDP, time on the cluster."""
    n_params, label = model_params(model)
    comm = strategy_comm(strategy, n_params, world_size, dtype)
    ddp = strategy_comm("ddp", n_params, world_size, dtype).bytes_sent_per_rank
    rows = "".join(f"<tr><td>{c.count} x {c.collective}</td><td>{c.phase}</td><td>{c.group} (N={c.group_size})</td>"
                   f"<td>{html.escape(format_bytes(c.bytes_sent))}</td></tr>" for c in comm.breakdown)
    ratio = f"{comm.bytes_sent_per_rank / ddp:.3g} x DDP" if ddp else "nothing to send at N = 1"
    cluster = cluster_for(world_size, topology)
    seconds = comm.time_on_cluster(cluster)
    where = (f"{cluster.nodes} x {topology}, {cluster.gpus_per_node} GPUs per node, "
             f"{cluster.gpu_bandwidth / 1e9:g} GB/s per GPU inside"
             + (f", {cluster.nics_per_node} x {cluster.nic_gbps:g} Gb/s NICs per node" if cluster.nodes > 1 else ""))
    return (f"<b>{html.escape(label)}, {strategy}, N = {world_size}</b><table>{rows}</table>"
            f"sent per rank per step: <b>{html.escape(format_bytes(comm.bytes_sent_per_rank))}</b> ({ratio})<br>"
            f"model states per GPU: {html.escape(format_bytes(comm.memory.total))}<br>"
            f"communication time (NCCL-style rings, no overlap, {html.escape(where)}): <b>{seconds * 1e3:,.1f} ms</b>")


def draw_comm(model=P2_PARAMS, strategy: str = "fsdp_full_shard", world_size: int = 64, dtype: str = "bf16"):
    """Two panels: traffic per rank against N (``strategy`` highlighted, ``world_size`` circled) and
    per-GPU memory of every strategy at ``world_size``. Returns the figure."""
    fig, (left, right) = _comm_axes(pyplot().figure(figsize=(10.8, 3.9)))
    _draw_comm_on(left, right, model, strategy, world_size, dtype)
    return fig


def _comm_axes(fig):
    """The two panels of :func:`draw_comm` at fixed margins (an explorer redraws them without a layout pass)."""
    grid = fig.add_gridspec(1, 2, left=0.07, right=0.94, bottom=0.15, top=0.92, wspace=0.32)
    return fig, (fig.add_subplot(grid[0]), fig.add_subplot(grid[1]))


def _draw_comm_on(left, right, model, strategy: str, world_size: int, dtype: str = "bf16") -> None:
    plot_traffic_vs_world_size(model, dtype=dtype, highlight=strategy, mark=world_size, ax=left)
    plot_memory_per_gpu(model, world_size, dtype=dtype, highlight=strategy, ax=right)


def comm_explorer(model=P2_PARAMS, strategy: str = "fsdp_full_shard", world_size: int = 64,
                  topology: str = "dgx-h100"):
    """Widget: model, strategy, world size and cluster preset over :func:`draw_comm`.

    Returns an ``ipywidgets.VBox`` of the controls, an HTML caption (:func:`describe_comm`) and an
    ``Image`` of the figure. The callback only sets widget values (no printing, for nbval); every
    combination the controls offer is valid (hybrid_shard uses ``min(8, world_size)`` GPUs per node).
    """
    w = widgets()
    models = [("7e9 params (card 04)", P2_PARAMS)] + [(name, name) for name in MODELS]
    model_dd = dropdown("model", models, model)
    strategy_dd = dropdown("strategy", STRATEGIES, strategy)
    size_slider = selection_slider("world_size", WORLD_SIZES, world_size)
    topology_dd = dropdown("cluster", TOPOLOGIES, topology, "topology")
    caption = w.HTML()
    image = explorer_image()
    controls = (model_dd, strategy_dd, size_slider, topology_dd)

    canvas = Canvas(10.8, 3.9)  # one figure, redrawn in place (see ._redraw)
    _, (left, right) = _comm_axes(canvas.fig)
    drawn = []  # the figure's arguments: the cluster changes the caption's time only

    def render(*_):
        text = describe_comm(model_dd.value, strategy_dd.value, size_slider.value, topology_dd.value)
        args = (model_dd.value, strategy_dd.value, size_slider.value)
        if drawn == [args]:
            caption.value = text
            return
        drawn[:] = [args]
        clear_plotted(left, right)
        _draw_comm_on(left, right, *args)
        show(image, caption, canvas, text)

    for control in controls:
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([model_dd, strategy_dd]), size_slider, topology_dd, caption, image])
