"""A sharded download drawn: a Gantt chart of requests per connection slot, throughput against the
concurrency limit under three caps, and an explorer over both.

The Gantt chart draws either a deterministic model (:func:`ringlab.calc.download.simulate_fetch`, the
explorer's) or a real run's event log (``FetchReport.attempts`` of :mod:`ringlab.shards.fetch`): both are
lists of attempts with a shard, a slot, a start, an end and an outcome. Nothing here measures anything.
"""

from __future__ import annotations

import numpy as np

from ringlab.calc.download import Caps, Fault, simulate_fetch, steady_throughput

from ._controls import dropdown, int_slider
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted

# outcome -> (colour, legend label); the model's and the real fetcher's words for the same thing
OUTCOME_STYLE = {
    "done": ("#4c78a8", "arrived"), "ok": ("#4c78a8", "arrived"),
    "503": ("#f58518", "failed, retried"), "reset": ("#f58518", "failed, retried"),
    "retry": ("#f58518", "failed, retried"),
    "failed": ("#d62728", "failed for good"),
    "cancelled": ("#9d9d9d", "cancelled"),
}
CANCEL_COLOUR = "#d62728"


def _field(attempt, name, default=None):
    return attempt.get(name, default) if isinstance(attempt, dict) else getattr(attempt, name, default)


def _shard_label(shard) -> str:
    """``3`` for a model's shard index 2, ``3`` for ``model-00003-of-00008.safetensors``."""
    if isinstance(shard, (int, np.integer)):
        return str(int(shard) + 1)
    text = str(shard)
    if text.startswith("model-") and "-of-" in text:
        return str(int(text[6:text.index("-of-")]))
    return "idx" if text.endswith(".json") else text[:6]


def draw_fetch_gantt(attempts, concurrency: int, cancelled_at: float | None = None, ax=None,
                     title: str | None = None, unit: str = "s", cancel_label: str = "everything cancelled"):
    """Gantt chart of a download: one row per connection slot (0..``concurrency``-1), one bar per request from
    its start to its end (seconds), coloured by outcome (:data:`OUTCOME_STYLE`), labelled with the shard's
    number; a retry (a shard's second or later request) starts with a black triangle, and ``cancelled_at``
    (seconds) draws the moment everything was cancelled, labelled ``cancel_label``. ``unit``: ``"s"`` or ``"ms"`` for the axis.
    Attempts are objects or dicts with ``shard``, ``slot``, ``start``, ``end`` (None: still open, drawn to
    ``cancelled_at``), ``outcome``. Returns the
    Figure; ValueError for an empty list, a slot outside the concurrency or an unknown outcome."""
    plt = pyplot()
    from matplotlib.collections import PolyCollection

    attempts = list(attempts)
    if not attempts:
        raise ValueError("attempts must hold at least one request to draw")
    if unit not in ("s", "ms"):
        raise ValueError(f"unit must be 's' or 'ms', got {unit!r}")
    scale = 1e3 if unit == "ms" else 1.0
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(10, 1.2 + 0.35 * concurrency))
    else:
        fig = ax.figure
    seen: dict = {}
    rects, colours, retries = [], [], []
    for a in sorted(attempts, key=lambda a: (_field(a, "start"), _field(a, "slot"))):
        slot, outcome = int(_field(a, "slot")), _field(a, "outcome")
        if not 0 <= slot < concurrency:
            raise ValueError(f"attempt on slot {slot}, outside 0..{concurrency - 1}")
        if outcome not in OUTCOME_STYLE:
            raise ValueError(f"unknown outcome {outcome!r}; known: {', '.join(OUTCOME_STYLE)}")
        end = _field(a, "end")  # a request still open when the log was taken ends at the cancellation
        end = end if end is not None else (cancelled_at if cancelled_at is not None else _field(a, "start"))
        s, e = _field(a, "start") * scale, end * scale
        rects.append((s, e, slot))
        colours.append(OUTCOME_STYLE[outcome][0])
        shard = _field(a, "shard")
        if seen.get(shard):
            retries.append((s, slot))
        seen[shard] = True
        ax.text((s + e) / 2, slot, _shard_label(shard), ha="center", va="center", fontsize=8, color="white",
                clip_on=True)
    x0, x1, y = np.array(rects, dtype=float).T
    corners = np.stack([np.stack([x0, y - 0.38], -1), np.stack([x0, y + 0.38], -1), np.stack([x1, y + 0.38], -1),
                        np.stack([x1, y - 0.38], -1)], axis=1)
    ax.add_collection(PolyCollection(corners, facecolors=colours, edgecolors="white", linewidths=0.6), autolim=False)
    if retries:
        rx, ry = np.array(retries, dtype=float).T
        ax.plot(rx, ry - 0.3, "v", color="black", ms=5, label="retry starts")
    end = float(x1.max())
    if cancelled_at is not None:
        ax.axvline(cancelled_at * scale, color=CANCEL_COLOUR, ls="--", lw=1.5, label=cancel_label)
        end = max(end, cancelled_at * scale)
    ax.set_xlim(0, end * 1.02 or 1)
    ax.set_ylim(concurrency - 0.5, -0.5)
    ax.set_yticks(range(concurrency), [f"slot {i}" for i in range(concurrency)], fontsize=8)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
    used = list(dict.fromkeys(OUTCOME_STYLE[_field(a, "outcome")][1] for a in attempts))
    colour_of = {label: colour for colour, label in OUTCOME_STYLE.values()}
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour_of[label]) for label in used]
    extra, extra_labels = ax.get_legend_handles_labels()
    ax.legend(handles + extra, used + extra_labels, fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5),
              frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    if own:
        fig.tight_layout()
    return fig


# ---- the explorer's model: 16 shards of 5 GB (an 80 GB checkpoint), three kinds of cap

GB = 1e9
SHARDS = 16
SHARD_BYTES = 5 * GB
SCENARIOS = {
    # one TCP stream over a long round trip: window / RTT ~ 100 MB/s each, a 100 Gb/s NIC far above
    "per-connection cap": Caps(per_connection=0.1 * GB, link=12.5 * GB),
    # a 10 Gb/s NIC that one stream already fills
    "link cap": Caps(per_connection=2 * GB, link=1.25 * GB),
    # a server that serves 6 streams at 0.9 GB/s in all and thrashes past them
    "throttling server": Caps(per_connection=0.25 * GB, link=12.5 * GB, server_streams=6, server_bandwidth=0.9 * GB),
}
FAULTS = {  # shard index -> what its attempts meet
    2: (Fault("503", retry_after=30.0),),
    5: (Fault("reset", fraction=0.5),),
}
BACKOFF_S = 5.0
DEADLINES = (("none", None), ("30 s", 30.0), ("60 s", 60.0), ("120 s", 120.0))
MAX_CONCURRENCY = 16


def throughput_curve(caps: Caps, shard_bytes=None, k_max: int = MAX_CONCURRENCY):
    """(K, simulated throughput, steady throughput) arrays for K = 1..``k_max`` on ``shard_bytes``
    (default :data:`SHARDS` x :data:`SHARD_BYTES`): the simulation pays for the last, partly empty wave."""
    sizes = [SHARD_BYTES] * SHARDS if shard_bytes is None else list(shard_bytes)
    ks = np.arange(1, k_max + 1)
    simulated = np.array([simulate_fetch(sizes, int(k), caps).throughput() for k in ks])
    steady = np.array([steady_throughput(int(k), caps) for k in ks])
    return ks, simulated, steady


def plot_throughput_vs_concurrency(scenarios: dict | None = None, ax=None, mark: int | None = None,
                                   k_max: int = MAX_CONCURRENCY):
    """Throughput (GB/s) against the concurrency limit K for each of ``scenarios`` (name -> :class:`Caps`,
    default :data:`SCENARIOS`): dots from the simulated download of :data:`SHARDS` shards, lines for the steady
    rate ``K x min(per-connection, link / K, server share)``. ``mark``: a K to draw as a vertical line.
    Returns the Figure."""
    plt = pyplot()
    scenarios = SCENARIOS if scenarios is None else scenarios
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
    else:
        fig = ax.figure
    colours = ("#4c78a8", "#f58518", "#54a24b", "#b279a2")
    for (name, caps), colour in zip(scenarios.items(), colours):
        ks, simulated, steady = throughput_curve(caps, k_max=k_max)
        ax.plot(ks, steady / GB, "-", color=colour, lw=1.2, label=f"{name}: steady rate")
        ax.plot(ks, simulated / GB, "o", color=colour, ms=4, label=f"{name}: {SHARDS} shards, simulated")
    if mark is not None:
        ax.axvline(mark, color="black", lw=1, ls=":")
    ax.set_xlabel("concurrency limit K (connections)")
    ax.set_ylabel("throughput (GB/s)")
    ax.set_xticks(range(1, k_max + 1, 1 if k_max <= 16 else 2))
    ax.set_ylim(0, None)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    if own:
        fig.tight_layout()
    return fig


def simulate_scenario(scenario: str, concurrency: int, faults: bool = False, deadline: float | None = None):
    """The explorer's download: :data:`SHARDS` shards of :data:`SHARD_BYTES` under ``SCENARIOS[scenario]``, with
    :data:`FAULTS` when ``faults`` (a 503 with Retry-After 30 s on shard 3, a reset half-way through shard 6;
    backoff :data:`BACKOFF_S`), cancelled at ``deadline`` seconds when given. ValueError for an unknown scenario."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
    return simulate_fetch([SHARD_BYTES] * SHARDS, concurrency, SCENARIOS[scenario], FAULTS if faults else None,
                          latency=0.2, backoff=BACKOFF_S, deadline=deadline)


def _caption(scenario: str, k: int, sched) -> str:
    caps = SCENARIOS[scenario]
    rate = steady_throughput(k, caps) / GB
    if sched.complete:
        done = (f"all {SHARDS} shards ({SHARDS * SHARD_BYTES / GB:.0f} GB) in {sched.finished:.1f} s = "
                f"{sched.throughput() / GB:.2f} GB/s")
    else:
        arrived = sum(1 for a in sched.attempts if a.outcome == "done")
        done = f"cancelled at {sched.cancelled_at:g} s with {arrived} of {SHARDS} shards arrived"
    return (f"<code>{scenario}, K={k}: {k} streams at {rate:.2f} GB/s in all (bound by the "
            f"{caps.binding(k).replace('_', '-')} cap) | {done} | peak {sched.peak_slots()} slots</code>")


def shards_explorer(scenario: str = "per-connection cap", concurrency: int = 4, faults: bool = True,
                    deadline: str = "none"):
    """Widget over the model of a sharded download: the ``scenario`` (:data:`SCENARIOS`), the concurrency
    limit K (1..:data:`MAX_CONCURRENCY`), scripted faults on or off (:data:`FAULTS`) and a deadline (one of
    :data:`DEADLINES`' labels). Top: the Gantt chart of the simulated download, one row per slot, retries
    and the cancellation marked; bottom: throughput against K for the scenario, K marked. Deterministic,
    so it draws the same on every machine. Returns an ``ipywidgets.VBox`` ending in an ``Image``; callbacks
    set widget values only and never print. ValueError names an argument outside the controls' choices."""
    w = widgets()
    scenario_dd = dropdown("cap", list(SCENARIOS), scenario, "scenario", width="260px")
    k_slider = int_slider("concurrency K", concurrency, 1, MAX_CONCURRENCY, name="concurrency", width="360px")
    deadline_dd = dropdown("deadline", [label for label, _ in DEADLINES], deadline, width="180px")
    if not isinstance(faults, bool):
        raise TypeError(f"faults must be True or False, got {faults!r}")
    faults_box = w.Checkbox(value=faults, description="faults: 503 + Retry-After on shard 3, reset in shard 6",
                            indent=False, layout=w.Layout(width="auto"))
    caption, image = w.HTML(), explorer_image()
    canvas = Canvas(10.8, 5.5)
    gantt_ax = canvas.fig.add_subplot(2, 1, 1)
    curve_ax = canvas.fig.add_subplot(2, 1, 2)
    canvas.fig.subplots_adjust(left=0.08, right=0.76, bottom=0.1, top=0.94, hspace=0.5)
    curves: dict[str, tuple] = {}

    def render(*_):
        name, k = scenario_dd.value, k_slider.value
        sched = simulate_scenario(name, k, faults_box.value, dict(DEADLINES)[deadline_dd.value])
        clear_plotted(gantt_ax, curve_ax)
        draw_fetch_gantt(sched.attempts, k, sched.cancelled_at, ax=gantt_ax, cancel_label="deadline: all cancelled",
                         title=f"{SHARDS} shards of {SHARD_BYTES / GB:g} GB, {name}, K={k}")
        if name not in curves:
            curves[name] = throughput_curve(SCENARIOS[name])
        ks, simulated, steady = curves[name]
        curve_ax.plot(ks, steady / GB, "-", color="#4c78a8", lw=1.2, label="steady rate")
        curve_ax.plot(ks, simulated / GB, "o", color="#4c78a8", ms=4, label=f"{SHARDS} shards, no faults")
        curve_ax.axvline(k, color="black", lw=1, ls=":", label=f"K = {k}")
        curve_ax.set_xlabel("concurrency limit K")
        curve_ax.set_ylabel("throughput (GB/s)")
        curve_ax.set_xticks(range(1, MAX_CONCURRENCY + 1))
        curve_ax.set_ylim(0, float(max(steady.max(), simulated.max())) / GB * 1.15)
        curve_ax.grid(True, alpha=0.3)
        curve_ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        show(image, caption, canvas, _caption(name, k, sched))

    for control in (scenario_dd, k_slider, deadline_dd, faults_box):
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([scenario_dd, k_slider, deadline_dd]), faults_box, caption, image])


__all__ = ["draw_fetch_gantt", "plot_throughput_vs_concurrency", "shards_explorer", "simulate_scenario",
           "throughput_curve"]
