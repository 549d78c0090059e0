"""Pipeline schedules drawn as a time x stage grid of F/B/W slots (idle slots are the bubble),
bubble curves against the number of micro-batches, and a widget over P, M, v and the schedule.

Grids come from :func:`ringlab.calc.pipeline_schedule` (a simulation of GPipe, 1F1B,
interleaved 1F1B and ZB-H1); closed forms from :func:`ringlab.calc.bubble_fraction`
(Narayanan et al. 2021; Huang et al. 2019; Qi et al. 2023).
"""

from __future__ import annotations

import numpy as np

from ringlab.calc import bubble_fraction, peak_in_flight, pipeline_schedule
from ringlab.calc.pipeline import BACKWARD, FORWARD, IDLE, SCHEDULES, WEIGHT

from ._controls import dropdown, int_slider
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted

COLOURS = {FORWARD: "#4c78a8", BACKWARD: "#f58518", WEIGHT: "#54a24b"}
IDLE_COLOUR = "#fde2e2"
LETTER = {FORWARD: "F", BACKWARD: "B", WEIGHT: "W"}
MAX_LABELLED_SLOTS = 150  # wider grids leave too few pixels per slot for micro-batch numbers


def _runs(sched, stage: int):
    """Contiguous ops of one stage: (start slot, length, kind, micro-batch, chunk)."""
    cells = list(zip(sched.kind[:, stage], sched.microbatch[:, stage], sched.chunk[:, stage]))
    runs, start = [], 0
    for t in range(1, len(cells) + 1):
        if t == len(cells) or cells[t] != cells[start]:
            kind, mb, chunk = (int(v) for v in cells[start])
            if kind != IDLE:
                runs.append((start, t - start, kind, mb, chunk))
            start = t
    return runs


def _lighter(colour: str, amount: float) -> tuple[float, float, float]:
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    return tuple(rgb + (1 - rgb) * amount)


def closed_form_text(stages: int, microbatches: int, schedule: str, virtual_stages: int = 1) -> str:
    """'ideal 0.4375, total 0.3043' from :func:`bubble_fraction`, or why there is no closed form."""
    try:
        return ", ".join(f"{rel} {bubble_fraction(stages, microbatches, schedule, virtual_stages, rel):.4f}"
                         for rel in ("ideal", "total"))
    except ValueError as exc:  # zb-h1 with M < P has none
        return f"no closed form ({str(exc).split(';')[0]})"


def _width(makespan: int) -> float:
    return min(10.8, max(7.0, 2 + 0.16 * makespan))  # at most the width of a notebook at 100 dpi


def draw_schedule(stages: int, microbatches: int, schedule: str = "1f1b", virtual_stages: int = 1,
                  t_f: int = 1, t_b: int = 1, t_w: int = 1, ax=None, legend: bool = True):
    """Draw one optimizer step as a grid: x = time slot, y = stage (stage 0 on top).

    F slots blue, B orange, W green (ZB-H1 only; the other schedules run B and W as one
    backward of ``t_b + t_w`` slots); with ``virtual_stages`` > 1 later model chunks are
    lighter. Idle slots, the bubble, are pink. Small grids carry each op's micro-batch number.
    The title gives the measured bubble (idle slots / busy slots and / all slots) and the
    closed form. Arguments and errors as :func:`ringlab.calc.pipeline_schedule` (op times in
    slots; with v > 1 they are per chunk). Returns the Figure.
    """
    plt = pyplot()
    sched = pipeline_schedule(stages, microbatches, schedule, virtual_stages, t_f, t_b, t_w)
    p, v = sched.stages, sched.virtual_stages
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=_size(sched))
    else:
        fig = ax.figure
    label = sched.makespan <= MAX_LABELLED_SLOTS
    for s in range(p):
        ax.broken_barh([(0, sched.makespan)], (s - 0.45, 0.9), facecolors=IDLE_COLOUR, edgecolor="none")
        for start, length, kind, mb, chunk in _runs(sched, s):
            face = _lighter(COLOURS[kind], 0.45 * chunk / max(v - 1, 1)) if v > 1 else COLOURS[kind]
            ax.broken_barh([(start, length)], (s - 0.45, 0.9), facecolors=face, edgecolor="white", lw=0.6)
            if label:
                ax.text(start + length / 2, s, str(mb), ha="center", va="center", fontsize=6, color="white")
    idle = int(sched.idle_slots().sum())
    v_text = f", v={v}" if v > 1 else ""
    ax.set_title(f"{schedule}, P={p}, M={sched.microbatches}{v_text}: {idle} idle of {sched.kind.size} slots\n"
                 f"measured ideal {sched.bubble_fraction('ideal'):.4f}, total {sched.bubble_fraction('total'):.4f}; "
                 f"closed form {closed_form_text(p, sched.microbatches, schedule, v)}", fontsize=8)
    ax.set_xlim(0, sched.makespan)
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_yticks(range(p), [f"stage {s}" for s in range(p)], fontsize=7)
    def slots(k: int) -> str:
        return f"{k} slot" + ("s" if k != 1 else "")

    per_chunk = f"one chunk's forward = {slots(t_f)}, its backward = {slots(t_b + t_w)}; " if v > 1 else ""
    ax.set_xlabel(f"time slot ({per_chunk}a stage's forward = {slots(t_f * v)}, its backward = "
                  f"{slots((t_b + t_w) * v)})", fontsize=8)
    if legend or v > 1:  # an interleaved panel always names its chunk shades
        backward = "B" if schedule == "zb-h1" else "B (incl. W)"
        entries = [(COLOURS[k], name) for k, name in zip(COLOURS, ("F", backward, "W"))]
        if v > 1:
            entries = [(_lighter(colour, 0.45 * c / (v - 1)), f"{name}, model chunk {c}")
                       for colour, name in entries[:2] for c in range(v)]
        entries.append((IDLE_COLOUR, "idle (bubble)"))
        ax.legend([plt.Rectangle((0, 0), 1, 1, color=c) for c, _ in entries], [name for _, name in entries],
                  fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    if own:
        fig.tight_layout()
    return fig


def _size(sched) -> tuple[float, float]:
    """Inches of a one-schedule figure: wider with the makespan, taller with the stages."""
    return _width(sched.makespan), 1.2 + 0.32 * sched.stages


def compare_schedules(stages: int, microbatches: int, schedules=("gpipe", "1f1b", "interleaved-1f1b", "zb-h1"),
                      virtual_stages: int = 2):
    """The same P and M under several schedules, stacked on one time axis. Returns the Figure.

    ``virtual_stages`` applies to interleaved-1f1b only (which needs M divisible by P); its ops
    are chunk ops of 1 slot, so the other schedules run with ops of ``virtual_stages`` slots to
    share one time axis (a stage's forward lasts ``virtual_stages`` slots in every panel).
    """
    plt = pyplot()
    setups = [(s, virtual_stages, 1) if s == "interleaved-1f1b" else (s, 1, virtual_stages) for s in schedules]
    width = max(pipeline_schedule(stages, microbatches, s, v, t, t, t).makespan for s, v, t in setups)
    fig, axes = plt.subplots(len(setups), 1, figsize=(_width(width), len(setups) * (1.3 + 0.32 * stages)),
                             sharex=True, squeeze=False)
    for i, (ax, (name, v, t)) in enumerate(zip(axes[:, 0], setups)):
        draw_schedule(stages, microbatches, name, v, t, t, t, ax=ax, legend=i == 0)
        ax.set_xlim(0, width)
    fig.tight_layout()
    return fig


def plot_bubble_curves(stages: int = 8, max_microbatches: int = 64, virtual_stages: int = 2, relative_to="total"):
    """Bubble fraction against M for each schedule: closed-form lines, and measured grid points (dots).

    Points are idle-slot counts of :func:`pipeline_schedule` at M = P, 2P, 4P, ...; lines are
    :func:`bubble_fraction` (zb-h1 from M = P, interleaved at multiples of P). Returns the Figure.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    ms = np.arange(1, max_microbatches + 1)
    measured_at = [m for m in (stages * 2**i for i in range(8)) if m <= max_microbatches]
    for name, colour in zip(SCHEDULES, ("#9467bd", "#1f77b4", "#2ca02c", "#d62728")):
        v = virtual_stages if name == "interleaved-1f1b" else 1
        valid = [m for m in ms if (name != "interleaved-1f1b" or m % stages == 0) and (name != "zb-h1" or m >= stages)]
        curve = [bubble_fraction(stages, int(m), name, v, relative_to) for m in valid]
        ls = ":" if name == "gpipe" else "-"  # gpipe and 1f1b coincide; dotted lets both show
        ax.plot(valid, curve, ls, color=colour, lw=2 if name == "gpipe" else 1.2,
                label=f"{name}{f' (v={v})' if v > 1 else ''}")
        ax.plot(measured_at, [pipeline_schedule(stages, m, name, v).bubble_fraction(relative_to) for m in measured_at],
                "o", color=colour, ms=4)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("micro-batches per step M")
    ax.set_ylabel(f"bubble / {'ideal compute' if relative_to == 'ideal' else 'wall clock'}")
    ax.set_title(f"P = {stages} stages; lines: closed form, dots: idle slots counted in the simulated grid",
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def pipeline_explorer(stages: int = 4, microbatches: int = 8, schedule: str = "1f1b", virtual_stages: int = 2):
    """Widget over :func:`draw_schedule`: ``P`` (stages), ``M`` (micro-batches), ``v`` and the schedule.

    ``v`` only applies to interleaved-1f1b (disabled otherwise); for it, M moves in multiples
    of P (Megatron-LM's requirement), so every position of the controls is a valid schedule.
    The caption gives the measured and closed-form bubbles and the peak in-flight micro-batches
    (activation memory) per stage. Returns an ``ipywidgets.VBox`` ending in an ``Image``; the
    callbacks set widget values only and never print.
    """
    w = widgets()
    p_slider = int_slider("P (stages)", stages, 1, 16, name="stages")
    m_slider = int_slider("M (micro)", microbatches, 1, 64, name="microbatches")
    v_slider = int_slider("v (chunks)", virtual_stages, 1, 4, name="virtual_stages")
    kind = dropdown("schedule", SCHEDULES, schedule)
    caption = w.HTML()
    image = explorer_image()
    canvas = Canvas(7.0, 2.5)  # one figure, sized to each schedule and redrawn in place (see ._redraw)
    ax = canvas.fig.add_subplot()
    updating = []  # non-empty while constraints rewrite M's range (which fires M's callback)

    def constrain():
        interleaved = kind.value == "interleaved-1f1b"
        v_slider.disabled = not interleaved
        p = p_slider.value
        step = p if interleaved else 1
        want = max(step, -(-m_slider.value // step) * step)  # round M up to a multiple of P
        m_slider.min, m_slider.step, m_slider.max = step, step, 64 if not interleaved else max(p, 64 // p * p)
        m_slider.value = min(want, m_slider.max)

    def render(*_):
        if updating:
            return
        updating.append(True)
        try:
            constrain()
        finally:
            updating.clear()
        p, m, name = p_slider.value, m_slider.value, kind.value
        v = v_slider.value if name == "interleaved-1f1b" else 1
        sched = pipeline_schedule(p, m, name, v)
        peaks = ", ".join(map(str, peak_in_flight(p, m, name, v).tolist()))
        unit = "micro-batch chunks" if v > 1 else "micro-batches"
        width, height = _size(sched)
        # margins in inches: stage labels left, the legend right (wider with the chunks' shades), a
        # two-line title above, the slot axis below; fixed, where a layout pass would cost a redraw
        canvas.fig.set_size_inches(width, height)
        canvas.fig.subplots_adjust(left=0.75 / width, right=1 - (1.95 if v > 1 else 1.2) / width,
                                   bottom=0.5 / height, top=1 - 0.45 / height)
        clear_plotted(ax)
        draw_schedule(p, m, name, v, ax=ax)
        show(image, caption, canvas,
             f"<code>measured: ideal {sched.bubble_fraction('ideal'):.4f}, total "
             f"{sched.bubble_fraction('total'):.4f} | closed form: {closed_form_text(p, m, name, v)} | "
             f"peak in flight per stage ({unit}): {peaks}</code>")

    for control in (p_slider, m_slider, v_slider, kind):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([w.VBox([p_slider, m_slider]), w.VBox([v_slider, kind])]), caption, image])
