"""Figures for the GPU monitor's CSV logs (schema in :mod:`ringlab.labs.gpumon`)."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Iterable

import numpy as np

from ringlab.labs.gpumon import Row, read_log

from ._controls import dropdown
from ._controls import image as explorer_image
from ._mpl import show, widgets


def _series(rows: list[Row]):
    """Align the log on its ticks: every GPU gets one value per tick, NaN where it has no reading.

    Returns ``(times, gpus, errors)``: ``times`` the sorted tick datetimes; ``gpus`` a list of
    dicts (label, util, used, total as float arrays of len(times), lost spans as (start, end)
    datetimes), ordered by index; ``errors`` the datetimes of error rows.
    """
    times = sorted({datetime.fromisoformat(row.timestamp) for row in rows})
    slot = {t: i for i, t in enumerate(times)}
    step = np.median(np.diff(times)) if len(times) > 1 else None
    gpus: dict[str, dict] = {}
    errors = []
    for row in rows:
        t = datetime.fromisoformat(row.timestamp)
        if row.kind == "error":
            errors.append(t)
            continue
        gpu = gpus.setdefault(row.uuid or f"index {row.index}", {
            "index": row.index, "label": f"GPU {row.index} {row.name}".rstrip(), "lost": [],
            **{key: np.full(len(times), np.nan) for key in ("util", "used", "total")},
        })
        if row.kind == "sample":
            for key, value in (("util", row.utilization_gpu_pct), ("used", row.memory_used_mib),
                               ("total", row.memory_total_mib)):
                gpu[key][slot[t]] = np.nan if value is None else value
        elif row.kind == "lost":
            gpu["lost"].append([t, None])
        elif gpu["lost"] and gpu["lost"][-1][1] is None:  # back
            gpu["lost"][-1][1] = t
    for gpu in gpus.values():  # still lost at the end of the log: shade to one interval past the last tick
        for span in gpu["lost"]:
            if span[1] is None:
                span[1] = times[-1] + step if step is not None else times[-1]
    order = sorted(gpus.values(), key=lambda g: (g["index"] is None, g["index"] or 0))
    return times, order, errors


def plot_gpumon_log(path_or_rows: str | os.PathLike | Iterable[Row], *, title: str | None = None):
    """Plot a gpumon log: utilization.gpu (%) and memory used (GiB) per GPU over time (UTC).

    ``path_or_rows`` is a CSV path (read with :func:`ringlab.labs.gpumon.read_log`) or an
    iterable of :class:`~ringlab.labs.gpumon.Row`. Each GPU is one colour; a tick without a
    reading for it (lost GPU, failed call, ``[N/A]`` value) is NaN, so the line breaks there
    instead of dropping to 0; periods from a ``lost`` row to the matching ``back`` row are
    shaded in the GPU's colour; ``error`` rows are red triangles on the top edge of the
    utilization panel. Memory total is dashed. Memory is converted from MiB to GiB (2**30 bytes).

    Returns a ``matplotlib.figure.Figure`` (not registered with pyplot, so notebooks show it
    once). Raises ImportError without matplotlib, ValueError for a log without rows.
    """
    try:
        import matplotlib.dates as mdates
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("plot_gpumon_log needs matplotlib: pip install 'ringlab[lab]'") from exc
    rows = read_log(path_or_rows) if isinstance(path_or_rows, (str, os.PathLike)) else list(path_or_rows)
    if not rows:
        raise ValueError("path_or_rows holds no rows to plot")
    times, gpus, errors = _series(rows)

    fig = Figure(figsize=(9, 5.5), layout="constrained")
    util_ax, mem_ax = fig.subplots(2, 1, sharex=True)
    for n, gpu in enumerate(gpus):
        color = f"C{n % 10}"
        util_ax.plot(times, gpu["util"], marker=".", color=color, label=gpu["label"])
        mem_ax.plot(times, gpu["used"] / 1024, marker=".", color=color, label=f"{gpu['label']} used")
        mem_ax.plot(times, gpu["total"] / 1024, linestyle="--", linewidth=1, color=color, label=f"{gpu['label']} total")
        for k, (start, end) in enumerate(gpu["lost"]):
            for ax in (util_ax, mem_ax):
                ax.axvspan(start, end, color=color, alpha=0.15, linewidth=0,
                           label=f"GPU {gpu['index']} lost" if ax is util_ax and k == 0 else None)
    if errors:
        util_ax.plot(errors, [1.0] * len(errors), linestyle="none", marker="v", markersize=7, color="red",
                     transform=util_ax.get_xaxis_transform(), clip_on=False, label="error row")
    if not any(np.isfinite(gpu["used"]).any() for gpu in gpus):
        mem_ax.text(0.5, 0.5, "no memory readings in this log (unified-memory GPUs report [N/A])",
                    transform=mem_ax.transAxes, ha="center", va="center", color="0.4")

    util_ax.set_ylim(-3, 105)
    util_ax.set_ylabel("utilization.gpu (%)")
    mem_ax.set_ylabel("memory (GiB = 2$^{30}$ B)")
    mem_ax.set_ylim(bottom=0)
    mem_ax.set_xlabel("time (UTC)")
    locator = mdates.AutoDateLocator()
    mem_ax.xaxis.set_major_locator(locator)
    mem_ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    for ax in (util_ax, mem_ax):
        ax.grid(alpha=0.3)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small", frameon=False)
    n_lost = sum(len(gpu["lost"]) for gpu in gpus)
    fig.suptitle(title or f"GPU monitor: {len(gpus)} GPUs, ticks: {len(times)}, lost events: {n_lost}, "
                          f"error rows: {len(errors)}")
    return fig


# metric dropdown label -> (Row attribute, axis label); memory stays in MiB as the log records it
EXPLORER_METRICS = {
    "utilization.gpu (%)": ("utilization_gpu_pct", "utilization.gpu (%)"),
    "memory.used (MiB)": ("memory_used_mib", "memory.used (MiB = 2$^{20}$ B)"),
    "power.draw (W)": ("power_draw_w", "power.draw (W)"),
    "temperature.gpu (C)": ("temperature_gpu_c", "temperature.gpu (C)"),
}


def plot_gpumon_metric(rows: list[Row], metric: str, gpu: str = "all"):
    """One metric of a gpumon log over time (UTC), per GPU; ticks without a reading are gaps.

    ``metric`` is a key of :data:`EXPLORER_METRICS`; ``gpu`` is ``"all"`` or a label as listed by
    :func:`gpumon_labels`. Lost periods are shaded. Returns a ``matplotlib.figure.Figure``.
    Raises ValueError for an unknown metric or GPU label.
    """
    from matplotlib.figure import Figure

    if metric not in EXPLORER_METRICS:
        raise ValueError(f"metric={metric!r}; accepted: {', '.join(EXPLORER_METRICS)}")
    labels = gpumon_labels(rows)
    if gpu != "all" and gpu not in labels:
        raise ValueError(f"gpu={gpu!r}; accepted: all, {', '.join(labels)}")
    attr, ylabel = EXPLORER_METRICS[metric]
    times, gpus, _ = _series(rows)
    slot = {t: i for i, t in enumerate(times)}
    fig = Figure(figsize=(8, 3.2), layout="constrained")
    ax = fig.subplots()
    for n, g in enumerate(gpus):
        if gpu != "all" and g["label"] != gpu:
            continue
        values = np.full(len(times), np.nan)
        for row in rows:
            if row.kind == "sample" and f"GPU {row.index} {row.name}".rstrip() == g["label"]:
                value = getattr(row, attr)
                values[slot[datetime.fromisoformat(row.timestamp)]] = np.nan if value is None else value
        ax.plot(times, values, marker=".", color=f"C{n % 10}", label=g["label"])
        for start, end in g["lost"]:
            ax.axvspan(start, end, color=f"C{n % 10}", alpha=0.15, linewidth=0)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("time (UTC)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", frameon=False)
    return fig


def gpumon_labels(rows: list[Row]) -> list[str]:
    """GPU labels (``"GPU <index> <name>"``) in index order, as the figures name them."""
    return [g["label"] for g in _series(rows)[1]]


def gpumon_explorer(path_or_rows: str | os.PathLike | Iterable[Row]):
    """Widget: a GPU selector and a metric dropdown over :func:`plot_gpumon_metric`, plus a summary line.

    Returns an ``ipywidgets.VBox`` (two dropdowns, an HTML line, an ``Image`` with the PNG). The
    callback only sets widget values (no printing: under nbval output from a callback breaks the cell).
    """
    w = widgets()
    rows = read_log(path_or_rows) if isinstance(path_or_rows, (str, os.PathLike)) else list(path_or_rows)
    gpu = dropdown("GPU", ["all", *gpumon_labels(rows)], "all")
    metric = dropdown("metric", list(EXPLORER_METRICS), next(iter(EXPLORER_METRICS)))
    caption = w.HTML()
    image = explorer_image()

    def render(*_):
        chosen = [r for r in rows if gpu.value == "all" or f"GPU {r.index} {r.name}".rstrip() == gpu.value]
        counts = {kind: sum(r.kind == kind for r in chosen) for kind in ("sample", "lost", "back")}
        errors = sum(r.kind == "error" for r in rows)
        show(image, caption, plot_gpumon_metric(rows, metric.value, gpu.value),
             f"<code>{gpu.value}: {counts['sample']} samples, {counts['lost']} lost, "
             f"{counts['back']} back; error rows in the log: {errors}</code>")

    gpu.observe(render, names="value")
    metric.observe(render, names="value")
    render()
    return w.VBox([gpu, metric, caption, image])
