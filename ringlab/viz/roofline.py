"""Roofline figures (log-log, one panel per accelerator) and a widget to move kernels around.

Every number drawn comes from :func:`ringlab.calc.roofline` and the kernel cost helpers of
:mod:`ringlab.calc.roofline` (Williams, Waterman & Patterson 2009); peaks are dense unless
``sparse=True``, bandwidths are the datasheet HBM figures of :data:`ringlab.calc.HARDWARE`.
"""

from __future__ import annotations

import numpy as np

from ringlab.calc import HARDWARE, get_hardware, roofline
from ringlab.calc.roofline import attention_decode_cost, elementwise_cost, layernorm_cost, matmul_cost

from ._controls import image as explorer_image
from ._controls import int_slider, selection_slider
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted

DEFAULT_HARDWARE = ("a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm")
KERNEL_MARKERS = "osD^vP*Xhp<>"
X_RANGE = (0.05, 2e4)  # arithmetic intensity shown, FLOP/B


def example_kernels(dtype: str = "bf16") -> list[tuple[str, float, float]]:
    """A handful of kernels as ``(label, flops, bytes_moved)``, from card 06's kernel to decode attention.

    Sizes: card 06's kernel (512 GFLOP, 8 GB); square 4096 matmul; the 1 x 4096 x 4096 matrix-vector
    product of batch-1 decode and the same at batch 256; a chain of 4 elementwise ops over 2^24
    elements, unfused and fused; LayerNorm over (8192, 4096); one layer of decode attention with
    32 query and 8 KV heads of 128 over 4,096 cached tokens for 8 sequences.
    """
    return [
        ("card 06: 512 GFLOP, 8 GB", 512e9, 8e9),
        ("matmul 4096^3", *matmul_cost(4096, 4096, 4096, dtype)),
        ("GEMV 1x4096x4096 (decode, batch 1)", *matmul_cost(1, 4096, 4096, dtype)),
        ("matmul 256x4096x4096 (decode, batch 256)", *matmul_cost(256, 4096, 4096, dtype)),
        ("4 elementwise ops, unfused", *elementwise_cost(2**24, 4, dtype)),
        ("4 elementwise ops, fused", *elementwise_cost(2**24, 4, dtype, fused=True)),
        ("layernorm 8192x4096", *layernorm_cost(8192, 4096, dtype)),
        ("decode attention, GQA 32:8, 4k ctx", *attention_decode_cost(8, 4096, 32, 8, 128, dtype)),
    ]


def _draw_panel(ax, hardware: str, kernels, dtype: str, sparse: bool, x_range) -> None:
    """One accelerator: the roof, the ridge, and every kernel at (intensity, attainable FLOP/s)."""
    results = [roofline(flops, nbytes, hardware, dtype, sparse) for _, flops, nbytes in kernels]
    hw = get_hardware(hardware)
    chip = roofline(1.0, 1.0, hw, dtype, sparse)  # the chip's peak and ridge, whatever the kernels
    peak, ridge = chip.peak_flops, chip.ridge_point
    x = np.geomspace(*x_range, 200)
    ax.loglog(x, np.minimum(peak, x * hw.hbm_bandwidth) / 1e12, color="0.2", lw=2)
    ax.axvline(ridge, color="0.5", ls=":", lw=1)
    ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, peak / 1e12), xytext=(4, -14), textcoords="offset points",
                fontsize=8, color="0.3")
    ax.axvspan(x_range[0], ridge, color="#ddeeff", alpha=0.5, lw=0)
    ax.text(0.03, 0.03, "memory-bound side", transform=ax.transAxes, fontsize=7, color="#1f5fa8")
    for (label, _, _), res, marker in zip(kernels, results, KERNEL_MARKERS * 4):
        ax.plot(res.intensity, res.attainable_flops / 1e12, marker, ms=7, label=label,
                mfc="white" if res.bound == "compute" else None)
    kind = "sparse" if sparse else "dense"
    ax.set_title(f"{hw.name}: {peak / 1e12:.0f} TFLOP/s {kind} {dtype}, {hw.hbm_bandwidth / 1e12:.3g} TB/s",
                 fontsize=9)
    ax.set_xlabel("arithmetic intensity (FLOP/B)")
    ax.set_xlim(*x_range)
    ax.grid(True, which="major", alpha=0.3)


def plot_roofline(kernels=None, hardware=DEFAULT_HARDWARE, dtype: str = "bf16", sparse: bool = False,
                  x_range=X_RANGE):
    """Log-log rooflines of several accelerators side by side, with kernels as points.

    ``kernels``: sequence of ``(label, flops, bytes_moved)`` (FLOP, bytes); default
    :func:`example_kernels`. ``hardware``: preset names (one panel each). Each panel draws
    attainable TFLOP/s = min(peak, intensity x bandwidth) (Williams et al. 2009), the ridge
    point peak / bandwidth as a dotted line, the memory-bound side shaded, and every kernel at
    its intensity and attainable rate: filled markers are memory-bound, hollow ones
    compute-bound. The same kernel sits at the same intensity on every chip; only the roof
    moves. Returns the Figure. Raises ValueError for unknown presets or a dtype a chip lacks,
    and for an empty ``hardware``.
    """
    plt = pyplot()
    kernels = example_kernels(dtype) if kernels is None else list(kernels)
    names = [get_hardware(h).name for h in ([hardware] if isinstance(hardware, str) else hardware)]
    if not names:
        raise ValueError("hardware must name at least one preset")
    fig = plt.figure(figsize=_figsize(len(names)))
    _draw_rooflines_on(_panels(fig, len(names), len(kernels)), kernels, names, dtype, sparse, x_range)
    return fig


def _figsize(panels: int) -> tuple[float, float]:
    return 1.0 + 3.6 * panels, 4.3


def _panels(fig, panels: int, kernels: int) -> list:
    """One axes per chip sharing the y axis, at fixed margins that leave room below for the legend's rows
    of 4 kernels (no layout pass, so an explorer redraws them quickly)."""
    width = fig.get_figwidth()
    grid = fig.add_gridspec(1, panels, left=0.7 / width, right=1 - 0.15 / width, top=0.93, wspace=0.06,
                            bottom=0.22 + 0.045 * ((kernels - 1) // 4) if kernels else 0.12)
    axes = [fig.add_subplot(grid[0, 0])]
    axes += [fig.add_subplot(grid[0, i], sharey=axes[0]) for i in range(1, panels)]
    for ax in axes[1:]:
        ax.tick_params(labelleft=False)
    return axes


def _draw_rooflines_on(axes, kernels, names, dtype: str, sparse: bool, x_range) -> None:
    fig = axes[0].figure
    for ax, name in zip(axes, names):
        _draw_panel(ax, name, kernels, dtype, sparse, x_range)
    axes[0].set_ylabel("attainable TFLOP/s")
    for legend in list(fig.legends):
        legend.remove()
    if kernels:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=7, frameon=False,
                   title="filled marker: memory-bound; hollow: compute-bound", title_fontsize=7)


def roofline_table(kernels, hardware, dtype: str = "bf16", sparse: bool = False) -> str:
    """HTML table: for each kernel and chip, intensity, bound and roofline time (same sources as the plot)."""
    rows = []
    for label, flops, nbytes in kernels:
        cells = []
        for h in hardware:
            r = roofline(flops, nbytes, h, dtype, sparse)
            cells.append(f"<td>{r.bound}, {r.time_s * 1e3:.4g} ms ({r.fraction_of_peak:.0%} of peak)</td>")
        intensity = flops / nbytes
        rows.append(f"<tr><td>{label}</td><td>{intensity:.4g}</td>{''.join(cells)}</tr>")
    head = "".join(f"<th>{get_hardware(h).name}</th>" for h in hardware)
    return f"<table><tr><th>kernel</th><th>FLOP/B</th>{head}</tr>{''.join(rows)}</table>"


def roofline_explorer(hardware=DEFAULT_HARDWARE, dtype: str = "bf16"):
    """Widget: pick accelerators and kernel sizes; the rooflines and a table follow.

    Controls: ``hardware`` (several presets, shown side by side; presets with a ``dtype`` peak),
    matmul sizes ``m``, ``n``, ``k`` (powers of two), and an elementwise chain's ``ops`` count,
    drawn both unfused and fused so the fusion gain is visible. Returns an ``ipywidgets.VBox``
    whose last child is an ``Image`` (PNG); the callback sets widget values only and never prints.
    """
    w = widgets()
    usable = [name for name in HARDWARE if getattr(HARDWARE[name], f"tflops_{dtype}", None)]
    picker = w.SelectMultiple(options=usable, value=tuple(get_hardware(h).name for h in hardware),
                              rows=min(6, len(usable)), description="hardware")
    powers = [2**i for i in range(15)]
    size = {axis: selection_slider(axis, powers, v) for axis, v in (("m", 256), ("n", 4096), ("k", 4096))}
    ops = int_slider("ops", 4, 1, 12)
    table = w.HTML()
    image = explorer_image()
    canvas = Canvas(*_figsize(len(hardware)))  # one figure, redrawn in place (see ._redraw)
    drawn = {}  # the panels' axes, kept while the number of chips and kernels stays

    def render(*_):
        chosen = list(picker.value) or [usable[0]]
        m, n, k = (size[a].value for a in "mnk")
        kernels = [
            (f"matmul {m}x{n}x{k}", *matmul_cost(m, n, k, dtype)),
            (f"{ops.value} elementwise ops, unfused", *elementwise_cost(2**24, ops.value, dtype)),
            (f"{ops.value} elementwise ops, fused", *elementwise_cost(2**24, ops.value, dtype, fused=True)),
            ("card 06: 512 GFLOP, 8 GB", 512e9, 8e9),
        ]
        if drawn.get("panels") != (len(chosen), len(kernels)):  # a new set of panels: a new layout
            canvas.fig.clear()
            canvas.fig.set_size_inches(*_figsize(len(chosen)))
            drawn["panels"], drawn["axes"] = (len(chosen), len(kernels)), _panels(canvas.fig, len(chosen), len(kernels))
        clear_plotted(*drawn["axes"])
        _draw_rooflines_on(drawn["axes"], kernels, [get_hardware(h).name for h in chosen], dtype, False, X_RANGE)
        show(image, table, canvas, roofline_table(kernels, chosen, dtype))

    for control in (picker, ops, *size.values()):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([picker, w.VBox([*size.values(), ops])]), table, image])
