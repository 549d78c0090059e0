"""Figures and an explorer for training at scale: memory per GPU by pipeline stage, traffic per dimension.

Every number comes from :func:`ringlab.calc.training.plan.train_plan`; bytes are decimal GB (1e9 B).
"""

from __future__ import annotations

import html

from ringlab.calc import MODELS
from ringlab.calc.training.layout import ParallelLayout
from ringlab.calc.training.plan import TrainPlan, train_plan
from ringlab.calc.training.traffic import DIMENSIONS

from ._controls import dropdown
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets

PARTS = ("params", "grads", "optimizer", "activations", "temporary")
_COLORS = {"params": "#0969da", "grads": "#1a7f37", "optimizer": "#8250df", "activations": "#cf222e",
           "temporary": "#9a6700"}
ZERO = {"ZeRO-0 (DDP)": "ddp", "ZeRO-1": "zero1", "ZeRO-2": "zero2", "ZeRO-3 (FSDP full shard)": "zero3"}
DEGREES = (1, 2, 4, 8, 16, 32, 64, 128)


def memory_parts(plan: TrainPlan) -> dict[str, list[int]]:
    """Bytes per GPU of every pipeline stage, by part (:data:`PARTS`), each a list over stages."""
    rows = {part: [] for part in PARTS}
    for m in plan.memory:
        for part, value in zip(PARTS, (m.states.params, m.states.grads, m.states.optimizer_states, m.activations.total,
                                       m.temporary)):
            rows[part].append(value)
    return rows


def plot_memory_by_stage(plan: TrainPlan, capacity_gb: float | None = 80.0, ax=None):
    """Stacked bars of per-GPU memory for each pipeline stage, with the GPU's capacity as a dashed line."""
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    parts = memory_parts(plan)
    stages = list(range(len(plan.memory)))
    bottom = [0.0] * len(stages)
    for part in PARTS:
        values = [v / 1e9 for v in parts[part]]
        if any(values):
            ax.bar(stages, values, bottom=bottom, color=_COLORS[part], label=part, width=0.8)
            bottom = [b + v for b, v in zip(bottom, values)]
    if capacity_gb:
        ax.axhline(capacity_gb, color="black", linestyle="--", linewidth=1, label=f"{capacity_gb:g} GB")
    ax.set_xticks(stages if len(stages) <= 16 else stages[::max(1, len(stages) // 16)])
    ax.set_xlabel("pipeline stage")
    ax.set_ylabel("GB per GPU (1e9 B)")
    ax.set_title(f"{plan.model.name}: memory per GPU", fontsize=11)
    ax.legend(fontsize=9, loc="upper right")
    return ax.figure


def plot_traffic_by_dimension(plan: TrainPlan, ax=None):
    """Bars of bytes one GPU of the busiest stage sends per step, per parallel dimension."""
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.6))
    totals = plan.traffic_by_dimension()
    dims = [d for d in DIMENSIONS if totals[d]] or ["tp"]
    values = [totals[d] / 1e9 for d in dims]
    ax.bar(dims, values, color="#0969da")
    if min(values) > 0 and max(values) / min(values) > 100:
        ax.set_yscale("log")  # TP's bytes dwarf the rest: a log axis keeps every dimension visible
    ax.set_ylabel("GB sent per GPU per step")
    ax.set_title(f"traffic, stage {plan.busiest}", fontsize=11)
    return ax.figure


def describe_plan(plan: TrainPlan) -> str:
    """HTML caption: the layout, the busiest stage's memory, traffic per dimension and, if timed, MFU."""
    m = plan.memory[plan.busiest]
    traffic = ", ".join(f"{d.upper()} {v / 1e9:,.2f} GB" for d, v in plan.traffic_by_dimension().items() if v)
    lines = [f"<b>{html.escape(plan.layout.describe())}</b>, {plan.batch.num_microbatches} micro-batches per replica",
             f"stage {plan.busiest}: {m.total / 1e9:,.2f} GB per GPU (params {m.states.params / 1e9:,.2f}, "
             f"grads {m.states.grads / 1e9:,.2f}, optimizer {m.states.optimizer_states / 1e9:,.2f}, activations "
             f"{m.activations.total / 1e9:,.2f} with {m.activations.in_flight} in flight)",
             f"sent per step: {traffic or 'nothing (one GPU)'}"]
    if plan.time is not None:
        lines.append(f"step {plan.time.step_time:,.2f} s on the cluster, MFU {plan.time.mfu:.1%} "
                     "(matmuls at 0.75 of peak, assumed)")
    return "<br>".join(lines)


def draw_plan(plan: TrainPlan):
    """Memory by stage and traffic by dimension side by side; returns the figure."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    plot_memory_by_stage(plan, ax=left)
    plot_traffic_by_dimension(plan, ax=right)
    fig.tight_layout()
    return fig


def training_explorer(model: str = "llama-3-70b", seq_len: int = 8192, global_batch: int = 256, dp: int = 8,
                      tp: int = 8, pp: int = 4, cp: int = 1, ep: int = 1, zero: str = "zero1",
                      sequence_parallel: bool = True, recompute: str = "selective", topology: str = "dgx-h100"):
    """Widget over :func:`train_plan`: model, degrees, ZeRO stage, SP and recompute; memory and traffic figures.

    Returns an ``ipywidgets.VBox``. The callback only sets widget values (no printing, for nbval); a layout
    the model cannot take shows the calculator's error in the caption instead of a figure.
    """
    w = widgets()
    model_dd = dropdown("model", list(MODELS), model)
    seq_dd = dropdown("seq_len", (2048, 4096, 8192, 32768, 131072), seq_len, width="200px")
    degrees = {name: dropdown(name, DEGREES, value, width="130px")
               for name, value in (("dp", dp), ("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep))}
    zero_dd = dropdown("ZeRO", list(ZERO.items()), zero)
    sp_box = w.Checkbox(value=sequence_parallel, description="sequence parallel", indent=False,
                        layout=w.Layout(width="auto"))
    recompute_dd = dropdown("recompute", ("none", "selective", "full"), recompute, width="240px")
    caption = w.HTML()
    image = explorer_image()
    canvas = Canvas(10.8, 3.6)  # one figure, redrawn in place at fixed margins (no layout pass per change)
    grid = canvas.fig.add_gridspec(1, 2, width_ratios=[3, 2], left=0.065, right=0.99, bottom=0.14, top=0.9,
                                   wspace=0.2)
    left, right = canvas.fig.add_subplot(grid[0]), canvas.fig.add_subplot(grid[1])

    def render(*_):
        # Expert parallelism applies to MoE layers only: greyed out (and 1) for a dense model.
        moe = MODELS[model_dd.value].is_moe
        degrees["ep"].disabled = not moe
        if not moe and degrees["ep"].value != 1:
            degrees["ep"].value = 1  # observed: this call renders again
            return
        d = {name: dd.value for name, dd in degrees.items()}
        tried = (f"DP{d['dp']} x TP{d['tp']} x PP{d['pp']} x CP{d['cp']} x EP{d['ep']}, {zero_dd.value}, "
                 f"recompute {recompute_dd.value}, sequence parallel {'on' if sp_box.value else 'off'}")
        try:
            layout = ParallelLayout(d["dp"], d["tp"], d["pp"], d["cp"], d["ep"],
                                    sequence_parallel=sp_box.value and d["tp"] > 1)
            plan = train_plan(model_dd.value, layout, seq_dd.value, 1, max(global_batch, d["dp"]) // d["dp"] * d["dp"],
                              zero_dd.value, recompute_dd.value, topology=topology)
        except (ValueError, TypeError) as exc:
            # name the layout tried, so every change of a control shows even while the layout stays invalid
            caption.value = f"<span style='color:#cf222e'>{html.escape(tried)}: {html.escape(str(exc))}</span>"
            return
        left.cla()
        right.cla()
        plot_memory_by_stage(plan, ax=left)
        plot_traffic_by_dimension(plan, ax=right)
        show(image, caption, canvas, describe_plan(plan))

    controls = (model_dd, seq_dd, zero_dd, sp_box, recompute_dd, *degrees.values())
    for control in controls:
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([model_dd, seq_dd]), w.HBox(list(degrees.values())),
                   w.HBox([zero_dd, recompute_dd, sp_box]), caption, image])
