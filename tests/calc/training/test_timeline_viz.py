"""Gantt charts and the explorer of ringlab.viz.timeline: what is drawn matches the timeline it draws."""

import contextlib
import functools
import io
import subprocess
import sys

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from ringlab.calc.training.timeline import LayerCost, ddp_step, fsdp_step, pipeline_step  # noqa: E402
from ringlab.collectives.cost import Link  # noqa: E402
from ringlab.viz.timeline import (  # noqa: E402
    EXPOSED_COLOUR, compare_timelines, draw_timeline, plot_exposed_sweep, timeline_explorer,
)

LINK = Link("test", 0.0, 50e9)
LAYERS = [LayerCost(f"l{i}", 1e-3, 2e-3, 50 * 2**20) for i in range(8)]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _bars(ax):
    """(x, width, facecolour) of every broken_barh rectangle on ``ax``."""
    out = []
    for coll in ax.collections:
        for path, colour in zip(coll.get_paths(), coll.get_facecolors()):
            xs = path.vertices[:, 0]
            out.append((xs.min(), xs.max() - xs.min(), tuple(colour)))
    return out


def _is_exposed(colour):
    return matplotlib.colors.to_hex(colour[:3]) == EXPOSED_COLOUR


@pytest.mark.parametrize("timeline", [
    ddp_step(LAYERS, 8, LINK), fsdp_step(LAYERS, 8, LINK, forward_prefetch=False),
    fsdp_step(LAYERS, 8, LINK, streams="two"),
], ids=["ddp", "fsdp-no-prefetch", "fsdp-two-streams"])
def test_gantt_draws_every_task_and_marks_exactly_the_exposed_time(timeline):
    fig = draw_timeline(timeline)
    ax = fig.axes[0]
    bars = _bars(ax)
    red = sum(w for _, w, c in bars if _is_exposed(c))
    assert red == pytest.approx(sum(timeline.exposed().values()) * 1e3, rel=1e-9)
    assert sum(1 for _, _, c in bars if not _is_exposed(c)) == sum(1 for t in timeline.tasks if t.duration > 0)
    assert [t.get_text() for t in ax.get_yticklabels()] == list(timeline.streams())
    assert f"{timeline.step_time * 1e3:.2f} ms" in ax.get_title()


def test_pipeline_gantt_has_a_row_per_rank_and_stream():
    t = pipeline_step(3, 4, "1f1b", 1e-3, 1e-3, 1e-3, activation_bytes=2**24)
    labels = [x.get_text() for x in draw_timeline(t).axes[0].get_yticklabels()]
    assert labels[0] == "rank 0 compute" and "rank 1 p2p->0" in labels and len(labels) == 3 + 4


def test_gantt_refuses_empty_timelines_and_unknown_ranks():
    from ringlab.calc.training.timeline import simulate

    with pytest.raises(ValueError, match="ranks"):
        draw_timeline(simulate([]))
    with pytest.raises(ValueError, match="ranks"):
        draw_timeline(ddp_step(LAYERS, 8, LINK), ranks=[3])


def test_compare_shares_one_time_axis():
    fig = compare_timelines({"ddp": ddp_step(LAYERS, 8, LINK, bucket_cap_mb=1e6, first_bucket_mb=None),
                             "fsdp": fsdp_step(LAYERS, 8, LINK)})
    assert len(fig.axes) == 2 and fig.axes[0].get_xlim() == fig.axes[1].get_xlim()
    assert "sent 0.73 GB" in fig.axes[0].get_title() and "sent 1.10 GB" in fig.axes[1].get_title()


def test_exposed_sweep_dots_lie_on_the_closed_form_line():
    ax = plot_exposed_sweep(buckets=5, backward_s=1e-3, max_allreduce_s=3e-3, points=13).axes[0]
    line, dots = ax.lines[1], ax.lines[2]
    assert list(dots.get_ydata()) == pytest.approx(list(line.get_ydata()), rel=1e-9, abs=1e-12)


@functools.cache
def _layers(gpu):
    from ringlab.calc.training.timeline import model_layer_costs

    return model_layer_costs("llama-3-8b", 2048, 1, gpu, 0.5)


def _expected_timeline(strategy, bucket_mb, world, topology, prefetch, two_streams):
    """The step the explorer should draw for these settings: llama-3-8b, 2048 tokens x 1 on the cluster's GPU at
    50% of peak (the explorer's defaults), on ``world`` GPUs of ``topology`` placed as calc train places them."""
    from ringlab.calc.training.step import PRESET_HARDWARE, resolve_cluster

    layers, cluster = _layers(PRESET_HARDWARE[topology]), resolve_cluster(topology, world)
    if strategy == "ddp":
        return ddp_step(layers, world, cluster, bucket_cap_mb=bucket_mb)
    return fsdp_step(layers, world, cluster, forward_prefetch=prefetch, backward_prefetch=prefetch,
                     streams="two" if two_streams else "one")


def test_explorer_draws_what_each_control_asks_for_and_never_prints(monkeypatch):
    """Each control redraws the Gantt chart of the timeline its settings give: one bar per task that takes time and
    red bars exactly as long as the exposed communication, one row per stream, and the step time in the caption.
    Only the first drawing is encoded to PNG; the redraws are read from the figure itself."""
    import ringlab.viz.timeline as viz

    out = io.StringIO()
    drawn = []
    with contextlib.redirect_stdout(out):
        box = timeline_explorer("llama-3-8b", seq_len=2048)
        image, caption = box.children[-1], box.children[-2]
        assert bytes(image.value)[:4] == b"\x89PNG"
        monkeypatch.setattr(viz, "show", lambda image, caption, canvas, text: drawn.append(
            (_bars(canvas.fig.axes[0]), [t.get_text() for t in canvas.fig.axes[0].get_yticklabels()], text)))
        controls = {w.description: w for row in box.children[:2] for w in row.children}
        settings = {"strategy": "ddp", "bucket_mb": 25, "world": 64, "topology": "dgx-h100", "prefetch": True,
                    "two_streams": False}
        for description, key, value in (("bucket MiB", "bucket_mb", 1000.0), ("world_size", "world", 8),
                                        ("cluster", "topology", "dgx-b200"), ("strategy", "strategy", "fsdp"),
                                        ("FSDP prefetch", "prefetch", False),
                                        ("FSDP: AG and RS on two streams", "two_streams", True)):
            controls[description].value = value
            settings[key] = value
            expected = _expected_timeline(**settings)
            bars, rows, text = drawn[-1]
            red = sum(w for _, w, c in bars if _is_exposed(c))
            assert red == pytest.approx(sum(expected.exposed().values()) * 1e3, rel=1e-9), description
            busy = sum(1 for t in expected.tasks if t.duration > 0)
            assert sum(1 for _, _, c in bars if not _is_exposed(c)) == busy, description
            assert rows == list(expected.streams()), description
            assert f"step {expected.step_time * 1e3:.1f} ms" in text, description
    assert out.getvalue() == ""
    assert len(drawn) == 6 and all(drawn[i][0] != drawn[i + 1][0] for i in range(5))  # every control changed it
    assert controls["bucket MiB"].disabled and not controls["FSDP prefetch"].disabled  # FSDP: no DDP buckets


def test_import_ringlab_does_not_load_matplotlib_or_the_timeline():
    code = "import sys, ringlab; print('matplotlib' in sys.modules, 'ringlab.viz.timeline' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "False"], done.stderr
