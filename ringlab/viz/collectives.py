"""Figures for collective costs: alpha-beta time against message size, one line per algorithm."""

from __future__ import annotations

import numpy as np

from ringlab.collectives import algorithms_for
from ringlab.collectives.cost import alpha_beta_time, crossover, get_link


def plot_collective_times(collective: str = "all_reduce", fabric="nvlink4", world_size: int = 64,
                          algorithms=None, sizes=None, gamma: float = 0.0, ax=None):
    """Log-log plot of :func:`ringlab.collectives.cost.alpha_beta_time` against message size (bytes).

    ``sizes`` defaults to powers of two from 1 KiB to 16 GiB; crossovers with the large-message
    algorithm are marked with dotted vertical lines. Returns the matplotlib Figure.
    Raises ImportError naming the ``lab`` extra when matplotlib is missing.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plotting needs matplotlib: pip install 'ringlab[lab]'") from exc
    link = get_link(fabric)
    names = list(algorithms or algorithms_for(collective))
    sizes = np.asarray(sizes if sizes is not None else 2.0 ** np.arange(10, 35), dtype=float)
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
    else:
        fig = ax.figure
    for name in names:
        t = [alpha_beta_time(collective, name, world_size, int(m), link, gamma) for m in sizes]
        ax.loglog(sizes, t, label=name, marker=".", markersize=3)
    if collective != "all_to_all" and len(names) > 1:
        for name, m in crossover(collective, link, world_size, names, gamma=gamma).items():
            if m and sizes[0] <= m <= sizes[-1]:
                ax.axvline(m, color="grey", linestyle=":", linewidth=0.8)
                ax.annotate(name, (m, ax.get_ylim()[0]), rotation=90, fontsize=7, color="grey",
                            va="bottom", ha="right")
    ax.set_xlabel("message size S (bytes, nccl-tests definition)")
    ax.set_ylabel("alpha-beta time (s)")
    ax.set_title(f"{collective}, N={world_size}, {link.name} "
                 f"(alpha={link.alpha * 1e6:g} us, {link.bandwidth / 1e9:g} GB/s per direction)", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
