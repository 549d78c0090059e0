"""Figures for collective costs: alpha-beta time against message size, and a widget to explore it.

Everything plotted comes from :mod:`ringlab.collectives.cost` (the alpha-beta model of Thakur,
Rabenseifner & Gropp 2005 with the registry's closed-form bytes and step counts).
"""

from __future__ import annotations

import math

import numpy as np

from ringlab.collectives import algorithms_for
from ringlab.collectives.cost import (
    LINKS,
    NETWORK_LINKS,
    alpha_beta_time,
    cost_table,
    crossover,
    get_link,
    single_gpu_hosts,
)

from ._controls import dropdown, int_slider, selection_slider
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted

# The explorer's default comparison: NCCL's two all-reduce algorithms and MPICH's two halving-doubling ones.
RING_TREE_HD = ("ring", "double_binary_tree", "recursive_doubling", "rabenseifner")

# Two crossover labels closer than this (in decades of message size) would overlap, so they are staggered.
_LABEL_GAP_DECADES = 0.3


# GPUs per NVLink domain: an HGX/DGX H100 node (NVIDIA DGX H100 user guide), a GB200 NVL72 rack (NVIDIA GB200 NVL72)
NVLINK_DOMAIN_GPUS = {"nvlink4": 8, "nvlink5": 72}


def label_levels(positions, gap_decades: float = _LABEL_GAP_DECADES) -> list[int]:
    """Stagger levels for labels at ``positions`` (bytes > 0) on a log axis, in the input order.

    Sorted by position, a label within ``gap_decades`` of the previous one goes one level up, otherwise
    back to level 0. Level k is drawn left of its line when k is even and right of it when k is odd,
    ``k // 2`` rows higher, so two neighbours never share a side and a row.
    """
    order = sorted(range(len(positions)), key=lambda i: positions[i])
    levels = [0] * len(positions)
    for prev, cur in zip(order, order[1:]):
        if math.log10(positions[cur]) - math.log10(positions[prev]) < gap_decades:
            levels[cur] = levels[prev] + 1
    return levels


def plot_collective_times(collective: str = "all_reduce", fabric="nvlink4", world_size: int = 8,
                          algorithms=None, sizes=None, gamma: float = 0.0, ax=None):
    """Log-log plot of :func:`ringlab.collectives.cost.alpha_beta_time` against message size (bytes).

    ``sizes`` defaults to powers of two from 1 KiB to 16 GiB. A dotted vertical line marks each size
    above which the large-message algorithm (:data:`~ringlab.collectives.cost.LARGE_MESSAGE_ALGORITHM`,
    ring for all_reduce) beats the algorithm named next to it; labels of nearby crossings are staggered
    (:func:`label_levels`) so they stay readable. Returns the matplotlib Figure.
    Raises ImportError naming the ``lab`` extra when matplotlib is missing.
    """
    plt = pyplot()
    link = get_link(fabric)
    names = list(algorithms or algorithms_for(collective))
    sizes = np.asarray(sizes if sizes is not None else 2.0 ** np.arange(10, 35), dtype=float)
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
    else:
        fig = ax.figure
    styles = ("-", "--", "-.", ":")
    for i, name in enumerate(names):
        t = [alpha_beta_time(collective, name, world_size, int(m), link, gamma) for m in sizes]
        # earlier lines wider and dashed differently, so two algorithms with equal times both stay visible
        ax.loglog(sizes, t, label=name, marker=".", markersize=3, linestyle=styles[i % len(styles)],
                  linewidth=1.0 + 0.4 * (len(names) - 1 - i))
    if collective != "all_to_all" and len(names) > 1:
        crossings = [(name, m) for name, m in crossover(collective, link, world_size, names, gamma=gamma).items()
                     if m and sizes[0] <= m <= sizes[-1]]
        levels = label_levels([m for _, m in crossings])
        for (name, m), level in zip(crossings, levels):
            ax.axvline(m, color="grey", linestyle=":", linewidth=0.8)
            # x in data units, y as a fraction of the axes: independent of the time range plotted
            ax.text(m, 0.02 + 0.45 * (level // 2), f" {name} ", transform=ax.get_xaxis_transform(), rotation=90,
                    fontsize=7, color="dimgrey", va="bottom", ha="left" if level % 2 else "right")
    ax.set_xlabel("message size S (bytes, nccl-tests definition)")
    ax.set_ylabel("alpha-beta time (s)")
    domain = NVLINK_DOMAIN_GPUS.get(link.name)
    hypothetical = domain is not None and world_size > domain
    ax.set_title(f"{collective}, N={world_size}, {link.name} "
                 f"(alpha={link.alpha * 1e6:g} us, {link.bandwidth / 1e9:g} GB/s per direction)"
                 + (f"\nhypothetical: {world_size} GPUs in one {link.name} domain (it holds "
                    f"{domain})" if hypothetical else ""), fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def size_label(n: int) -> str:
    """``2**26`` -> ``'64 MiB (67.1 MB)'``: binary and decimal units, both labelled."""
    units = (("GiB", 2**30, "GB", 1e9), ("MiB", 2**20, "MB", 1e6), ("KiB", 2**10, "kB", 1e3))
    for unit, scale, dec_unit, dec in units:
        if n >= scale:
            return f"{n / scale:g} {unit} ({n / dec:.3g} {dec_unit})"
    return f"{n} B"


def explorer_rows(collective: str, algorithms, world_size: int, message_bytes: int, fabric) -> list[dict]:
    """The rows of :func:`~ringlab.collectives.cost.cost_table` for ``algorithms``, fastest first."""
    wanted = list(algorithms)
    rows = [r for r in cost_table(collective, world_size, message_bytes, fabric) if r["algorithm"] in wanted]
    return sorted(rows, key=lambda r: (r["seconds"], wanted.index(r["algorithm"])))


def _caption(rows: list[dict], message_bytes: int) -> str:
    cells = "".join(
        f"<tr><td>{'<b>' if i == 0 else ''}{r['algorithm']}{'</b>' if i == 0 else ''}</td><td>{r['steps']}</td>"
        f"<td>{r['bytes_per_rank_max'] / message_bytes:.3f}</td><td>{r['seconds'] * 1e6:,.1f}</td></tr>"
        for i, r in enumerate(rows))
    return ("<table><tr><th>algorithm</th><th>steps</th><th>busiest rank sends (x M)</th>"
            f"<th>time (us)</th></tr>{cells}</table>")


def _framed(fabric):
    """A network preset as the hosts with one GPU each that the flat model describes; other fabrics as given."""
    return single_gpu_hosts(fabric) if fabric in NETWORK_LINKS else fabric


def collectives_explorer(collective: str = "all_reduce", algorithms=RING_TREE_HD, world_size: int = 8,
                         message_bytes: int = 2**26, fabric: str = "nvlink4", max_world_size: int = 512):
    """Widget: ring vs tree vs halving-doubling time against message size, for a chosen fabric and N.

    Controls: ``world_size`` (IntSlider 2..max_world_size), ``message`` (powers of two, 1 KiB..16 GiB;
    marked on the plot with a solid line) and ``fabric`` (a :data:`~ringlab.collectives.cost.LINKS`
    preset). A network preset (``ib-ndr``, ``ib-xdr``) is timed as hosts with one GPU each
    (:func:`~ringlab.collectives.cost.single_gpu_hosts`, named so in the plot's title): the machine the
    flat model describes at any N; an NVLink preset past its domain is titled hypothetical. It opens
    on 8 ranks, one NVLink 4 domain. Below them: a table of each algorithm's steps, busiest-rank bytes
    and time at that message, fastest first, and the plot as PNG in an ``ipywidgets.Image``. Returns an
    ``ipywidgets.VBox``; the callback only sets widget values (printing from it would break nbval).
    Raises ValueError for unknown names (from the cost model) or a message size not a power of two
    in range.
    """
    w = widgets()
    options = [(size_label(2**k), 2**k) for k in range(10, 35)]
    if message_bytes not in dict(options).values():
        raise ValueError(f"message_bytes must be a power of two from 2**10 to 2**34, got {message_bytes}")
    get_link(fabric)
    algorithms = tuple(algorithms)
    explorer_rows(collective, algorithms, world_size, message_bytes, _framed(fabric))  # name errors before widgets
    n_slider = int_slider("world_size", world_size, 2, max_world_size, width="420px")
    m_slider = selection_slider("message", options, message_bytes, "message_bytes", width="420px")
    fabric_menu = dropdown("fabric", list(LINKS), fabric)
    caption = w.HTML()
    image = explorer_image()

    canvas = Canvas(7, 4.5)  # one figure, redrawn in place (see ._redraw)
    ax = canvas.fig.add_subplot()
    drawn = {}  # the curves' (N, fabric), and the line marking the message size

    def render(*_):
        n, m, f = n_slider.value, m_slider.value, fabric_menu.value
        f = _framed(f)
        if drawn.get("curves") != (n, f):  # the message size only moves its line
            clear_plotted(ax)
            plot_collective_times(collective, f, n, algorithms, ax=ax)
            drawn["curves"], drawn["message"] = (n, f), ax.axvline(m, color="black", linewidth=1)
        drawn["message"].set_xdata([m, m])
        show(image, caption, canvas, _caption(explorer_rows(collective, algorithms, n, m, f), m))

    for control in (n_slider, m_slider, fabric_menu):
        control.observe(render, names="value")
    render()
    return w.VBox([n_slider, m_slider, fabric_menu, caption, image])
