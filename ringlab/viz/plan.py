"""Figures and the explorer of topic 20: the ranked layouts of a training job and what each step is made of.

``plot_ranking(search, ax)``   one bar per ranked layout, its step split into the terms of
                               :data:`ringlab.plan.train.TERMS`; the binding constraint written beside it
``ranking_table(search)``      the ranked table as HTML (layout, step, MFU, memory, binding, why it loses)
``plan_explorer(...)``         model, GPU count and topology; the search reruns on a change (results cached)
"""

from __future__ import annotations

import html

from ringlab.plan.space import ZERO_STAGE, Space, TrainJob
from ringlab.plan.train import TERMS, TrainSearch, plan_train

from ._controls import dropdown
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted

COLORS = {"compute": "#4c72b0", "recompute": "#8172b3", "memory_bound": "#64b5cd", "bubble": "#c44e52",
          "tp": "#dd8452", "ep": "#da8bc3", "dp": "#55a868", "pp": "#937860", "cp": "#ccb974"}
BINDING_WORDS = {"memory": "memory limit", "tp_outside_nvlink": "TP off NVLink", "tp": "TP traffic",
                 "bubble": "bubble", "dp": "DP traffic", "ep": "EP all-to-all", "pp": "PP sends", "cp": "CP passes",
                 "recompute": "recompute", "memory_bound": "memory-bound kernels"}
EXPLORER_MODELS = ("llama-3-8b", "llama-3-70b", "mixtral-8x7b")
EXPLORER_GPUS = (64, 128, 256, 512)
EXPLORER_TOPOLOGIES = ("dgx-h100", "dgx-a100")
EXPLORER_SPACE = Space(zero=("zero1", "zero3"), recompute=("none", "full"), max_micro_batch=2, max_virtual_stages=4)
"""The explorer's search: ZeRO-1 or 3, no or full recompute, micro-batch 1-2, up to 4 virtual stages (the CLI
searches more; this keeps a change of control near a second)."""


def layout_label(row) -> str:
    c = row.candidate
    text = f"#{row.rank} DP{c.dp} TP{c.tp} PP{c.pp}"
    text += f" CP{c.cp}" if c.cp > 1 else ""
    text += f" EP{c.ep}" if c.ep > 1 else ""
    text += f" v{c.virtual_stages}" if c.virtual_stages > 1 else ""
    return text + f" Z{ZERO_STAGE[c.zero]}" + (" RC" if c.recompute == "full" else "")


def plot_ranking(search: TrainSearch, ax=None):
    """Stacked horizontal bars: each ranked layout's step time by term, fastest on top; returns the axes."""
    if ax is None:
        ax = pyplot().subplots(figsize=(10, 4))[1]
    rows = search.layouts
    labelled = set()
    for y, row in enumerate(rows):
        left = 0.0
        for key, seconds in row.terms().items():
            if seconds > 0:
                ax.barh(y, seconds, left=left, color=COLORS[key], height=0.7,
                        label=None if key in labelled else TERMS[key])
                labelled.add(key)
                left += seconds
        ax.text(left * 1.01, y, f"{row.mfu:.0%} MFU, binds: {BINDING_WORDS[row.binding]}", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [layout_label(r) for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # fastest on top; set, not toggled: the explorer redraws on the same axes
    longest = max((r.step_seconds for r in rows), default=1.0)
    ax.set_xlim(0, longest * 1.45)
    ax.set_xlabel("seconds per optimizer step (busiest pipeline stage)")
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=7, ncol=5, frameon=False)
    return ax


def ranking_table(search: TrainSearch) -> str:
    """The ranked layouts as an HTML table (escaped)."""
    head = "<tr><th>#</th><th>layout</th><th>step s</th><th>MFU</th><th>GB</th><th>binding</th><th>loses</th></tr>"
    body = "".join(
        f"<tr><td>{r.rank}</td><td>{html.escape(r.candidate.describe())}</td><td>{r.step_seconds:.3f}</td>"
        f"<td>{r.mfu:.1%}</td><td>{r.memory_bytes / 1e9:.1f}</td><td>{html.escape(r.binding_text)}</td>"
        f"<td>{html.escape(r.loses)}</td></tr>" for r in search.layouts)
    return f"<table style='font-size:80%'>{head}{body}</table>"


def describe_search(search: TrainSearch) -> str:
    """One paragraph: the job, the best layout and its binding constraint, and the search's counts."""
    best = search.best
    if best is None:
        return f"{search.job.describe()}: no layout fits the usable memory."
    pruned = sum(search.pruned.values())
    return (f"{search.job.describe()}. Best: {best.candidate.describe()}, {best.step_seconds:.2f} s per step, "
            f"{best.mfu:.0%} MFU; binding: {best.binding_text}. Searched {search.configurations:,} configurations, "
            f"evaluated {search.evaluated:,}, pruned {pruned:,}.")


def plan_explorer(model: str = "llama-3-8b", gpus: int = 64, topology: str = "dgx-h100", seq_len: int = 4096,
                  global_batch: int = 512, top: int = 8):
    """Widget over :func:`ringlab.plan.train.plan_train` (in :data:`EXPLORER_SPACE`): model, GPUs and topology;
    the ranked bars and table. Returns an ``ipywidgets.VBox``; searches are cached per (model, GPUs, topology)."""
    w = widgets()
    model_dd = dropdown("model", EXPLORER_MODELS, model, width="260px")
    gpus_dd = dropdown("GPUs", EXPLORER_GPUS, gpus, width="160px")
    topo_dd = dropdown("topology", EXPLORER_TOPOLOGIES, topology, width="220px")
    caption, table, image = w.HTML(), w.HTML(), explorer_image()
    canvas = Canvas(10.5, 4.2)
    ax = canvas.fig.add_axes([0.2, 0.12, 0.78, 0.74])
    cache: dict = {}

    def render(*_):
        key = (model_dd.value, gpus_dd.value, topo_dd.value)
        if key not in cache:
            job = TrainJob(key[0], key[1], key[2], seq_len, global_batch)
            cache[key] = plan_train(job, top, EXPLORER_SPACE)
        search = cache[key]
        clear_plotted(ax)
        plot_ranking(search, ax)
        table.value = ranking_table(search)
        show(image, caption, canvas, describe_search(search))

    for control in (model_dd, gpus_dd, topo_dd):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([model_dd, gpus_dd, topo_dd]), table, caption, image])
