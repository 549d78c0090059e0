"""Time one control change of each explorer (the callback's computation and its figure drawn to PNG, Agg),
as a ratio against a peer measured in the same run: a bare figure of the same pixel size drawn to PNG.

Every enabled control of each explorer is moved to a neighbouring position and back, ``--repeat`` times;
a change's time is the median of those. The peer is the least any redraw of a figure that size costs
(one empty axes), so the ratio says how many bare figures' worth of work a change costs, on any machine.
Wall times are printed for the record; nothing here asserts a time (the browser tests record the time a
change takes to settle on screen, in test-artifacts/browser/*_settle.json).

Usage: python benchmarks/bench_explorers.py [--repeat 3] [--only 13,18]
"""

from __future__ import annotations

import argparse
import io
import statistics
import struct
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import ipywidgets as w  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def explorers() -> dict:
    """Each explorer as its notebook builds it: {label: factory}."""
    from ringlab.labs.gpumon import SAMPLE_LOG
    from ringlab.viz import (collectives, comm, decode, gpumon, kvcache, pipeline, ring, roofline, serving, shards,
                             timeline, topology, training)

    return {
        "01 ring": lambda: ring.ring_explorer(max_world_size=12, world_size=4),
        "02 collectives": lambda: collectives.collectives_explorer(world_size=8, message_bytes=2**26, fabric="nvlink4"),
        "04 comm": lambda: comm.comm_explorer(strategy="fsdp_full_shard", world_size=64),
        "05 kv cache": lambda: kvcache.kv_explorer(model="llama-2-70b", tokens=4096, batch_size=32),
        "06 roofline": lambda: roofline.roofline_explorer(hardware=("a100-sxm-80gb", "h100-sxm")),
        "07 decode": lambda: decode.decode_explorer("llama-2-7b", "a100-sxm-80gb", context_len=4096, sla_ms=50),
        "08 pipeline": lambda: pipeline.pipeline_explorer(stages=4, microbatches=8, virtual_stages=2),
        "09 gpumon": lambda: gpumon.gpumon_explorer(SAMPLE_LOG),
        "13 fabric": lambda: topology.fabric_explorer("dgx-h100", nodes=2, algorithm="ring_channels", channels=8),
        "14 paged blocks": serving.block_explorer,
        "15 scheduler": serving.scheduler_explorer,
        "17 training": lambda: training.training_explorer(model="llama-3-70b", seq_len=8192, dp=8, tp=8, pp=4),
        "18 timeline": lambda: timeline.timeline_explorer("llama-3-8b", seq_len=4096, micro_batch=1),
        "19 shards": lambda: shards.shards_explorer("per-connection cap", concurrency=4, faults=True),
    }


def controls(box) -> list:
    """Enabled controls under ``box`` (sliders, dropdowns, toggles, checkboxes), in display order."""
    found, stack = [], [box]
    while stack:
        x = stack.pop(0)
        kinds = (w.IntSlider, w.FloatSlider, w.FloatLogSlider, w.SelectionSlider, w.Dropdown, w.ToggleButtons,
                 w.Checkbox)
        if isinstance(x, kinds) and not x.disabled:
            found.append(x)
        stack[:0] = list(getattr(x, "children", ()))
    return found


def neighbour(c):
    """A position of ``c`` next to its current one (the next one up, or down at the end)."""
    if isinstance(c, w.Checkbox):
        return not c.value
    if hasattr(c, "options"):
        values = [o[1] if isinstance(o, tuple) else o for o in c.options]
        i = values.index(c.value)
        return values[i + 1] if i + 1 < len(values) else values[i - 1]
    if isinstance(c, w.FloatLogSlider):
        return c.value * c.base ** (c.step if c.value * c.base ** c.step <= c.base ** c.max else -c.step)
    return c.value + c.step if c.value + c.step <= c.max else c.value - c.step


def png_size(data: bytes) -> tuple[int, int]:
    return struct.unpack(">II", bytes(data[16:24]))


def bare_figure_seconds(width: int, height: int, repeat: int) -> float:
    """Peer: a new figure of ``width`` x ``height`` pixels with one empty axes, drawn to PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    times = []
    for _ in range(repeat * 2):
        start = time.perf_counter()
        fig = Figure(figsize=(width / 100, height / 100), dpi=100)
        FigureCanvasAgg(fig)
        fig.add_subplot()
        fig.savefig(io.BytesIO(), format="png", dpi=100)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated notebook numbers, e.g. 13,18")
    args = parser.parse_args()
    wanted = {s.strip() for s in args.only.split(",") if s.strip()}
    print(f"{'explorer':16} {'controls':>8} {'median':>8} {'slowest':>8} {'bare fig':>8} {'median/peer':>11} "
          f"{'slowest/peer':>12}  slowest control")
    for label, build in explorers().items():
        if wanted and label.split()[0] not in wanted:
            continue
        box = build()
        image = box.children[-1]
        per_control = {}
        for c in controls(box):
            times = []
            for _ in range(args.repeat):
                for value in (neighbour(c), c.value):
                    if c.disabled:
                        break
                    start = time.perf_counter()
                    c.value = value
                    times.append(time.perf_counter() - start)
            if times:
                per_control[c.description or type(c).__name__] = statistics.median(times)
        peer = bare_figure_seconds(*png_size(image.value), args.repeat)
        slowest = max(per_control, key=per_control.get)
        med = statistics.median(per_control.values())
        print(f"{label:16} {len(per_control):8d} {med:8.3f} {per_control[slowest]:8.3f} {peer:8.3f} "
              f"{med / peer:11.1f} {per_control[slowest] / peer:12.1f}  {slowest}")


if __name__ == "__main__":
    main()
