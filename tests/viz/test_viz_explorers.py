"""Every explorer: controls that open on exactly their defaults, send a value on release, refuse an argument
they cannot show, and figures drawn to be read at a notebook's width (13, 14, 17, 18)."""

import struct
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import ipywidgets as w  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from ringlab.labs.gpumon import SAMPLE_LOG  # noqa: E402
from ringlab.topology import build_on_cluster, cost_of, get_cluster  # noqa: E402
from ringlab.viz import (  # noqa: E402
    collectives, comm, decode, gpumon, kvcache, nccl, pipeline, plan, ring, roofline, serving, shards, timeline,
    topology, training,
)
from ringlab.viz._controls import controls, reachable  # noqa: E402
from ringlab.viz._mpl import EXPLORER_DPI  # noqa: E402

NCCL_RUN = (Path(__file__).resolve().parents[1] / "fixtures" / "nccl" / "a100_sxm4_8gpu_nccl_tests_2_19.txt").read_text()

# Each explorer as its notebook builds it (and with its own defaults where the notebook passes arguments).
EXPLORERS = {
    "01 ring": lambda: ring.ring_explorer(max_world_size=12, world_size=4),
    "02 collectives": lambda: collectives.collectives_explorer(world_size=8, message_bytes=2**26, fabric="nvlink4"),
    "04 comm": lambda: comm.comm_explorer(strategy="fsdp_full_shard", world_size=64),
    "05 kv": lambda: kvcache.kv_explorer(model="llama-2-70b", dtype="fp16", tokens=4096, batch_size=32, tp=1),
    "06 roofline": lambda: roofline.roofline_explorer(hardware=("a100-sxm-80gb", "h100-sxm")),
    "07 decode": lambda: decode.decode_explorer("llama-2-7b", "a100-sxm-80gb", context_len=4096, sla_ms=50),
    "08 pipeline": lambda: pipeline.pipeline_explorer(stages=4, microbatches=8, schedule="1f1b", virtual_stages=2),
    "09 gpumon": lambda: gpumon.gpumon_explorer(SAMPLE_LOG),
    "13 fabric": lambda: topology.fabric_explorer("dgx-h100", nodes=2, algorithm="ring_channels", channels=8),
    "14 blocks": serving.block_explorer,
    "15 scheduler": lambda: serving.scheduler_explorer(num_requests=30),
    "16 explain": lambda: nccl.explain_explorer({"a100": NCCL_RUN}),
    "17 training": lambda: training.training_explorer(model="llama-3-70b", seq_len=8192, dp=8, tp=8, pp=4,
                                                      zero="zero1", recompute="selective"),
    "18 timeline": lambda: timeline.timeline_explorer("llama-3-8b", seq_len=4096, micro_batch=1, hardware="h100-sxm",
                                                      efficiency=0.5),
    "19 shards": lambda: shards.shards_explorer("per-connection cap", concurrency=4, faults=True),
    "20 plan": lambda: plan.plan_explorer("llama-3-8b", gpus=64, topology="dgx-h100"),
}


@pytest.fixture(scope="module")
def built():
    return {}


def _box(built, name):
    if name not in built:
        built[name] = EXPLORERS[name]()
    return built[name]


def _by_description(box) -> dict:
    return {c.description: c for c in controls(box)}


@pytest.mark.parametrize("name", EXPLORERS)
def test_every_control_holds_a_value_it_can_reach_and_sliders_send_on_release(built, name):
    box = _box(built, name)
    found = controls(box)
    assert found, f"{name}: no controls"
    for c in found:
        assert reachable(c), f"{name}: {c.description} = {c.value!r} is not a position of the control"
        if isinstance(c, (w.IntSlider, w.FloatSlider, w.FloatLogSlider, w.SelectionSlider)):
            assert c.continuous_update is False, f"{name}: slider {c.description} redraws while dragged"
        if isinstance(c, (w.IntSlider, w.FloatSlider, w.SelectionSlider, w.Dropdown)):
            assert c.style.description_width == "initial", f"{name}: {c.description} may cut its description"
    picture = box.children[-1]
    assert isinstance(picture, w.Image) and picture.layout.align_self == "flex-start"  # not stretched to the width
    assert picture.layout.max_width == "100%"


def test_explorers_open_on_the_values_they_were_given(built):
    t = _by_description(_box(built, "18 timeline"))
    assert t["bucket MiB"].value == 25 and 25 in t["bucket MiB"].options  # DDP's default, not the nearest 31.6
    assert (t["world_size"].value, t["cluster"].value) == (64, "dgx-h100")
    f = _by_description(_box(built, "13 fabric"))
    assert (f["cluster"].value, f["nodes"].value, f["algorithm"].value, f["channels"].value,
            f["log2 S (bytes)"].value) == ("dgx-h100", 2, "ring_channels", 8, 30)
    assert _by_description(_box(built, "02 collectives"))["message"].value == 2**26
    k = _by_description(_box(built, "05 kv"))
    assert (k["context"].value, k["batch"].value) == (4096, 32)
    assert _by_description(_box(built, "07 decode"))["SLA (ms)"].value == 50


def test_reachable_tells_grid_points_from_values_between_them():
    old = w.FloatLogSlider(value=25, base=10, min=0, max=4.5, step=0.25)  # the bucket slider before: 25 is between
    assert not reachable(old)
    old.value = 10**1.5
    assert reachable(old)
    assert not reachable(w.IntSlider(value=5, min=0, max=10, step=2))
    assert reachable(w.IntSlider(value=4, min=0, max=10, step=2))
    assert not reachable(w.FloatSlider(value=50.5, min=5, max=200, step=1))
    assert reachable(w.SelectionSlider(options=[1, 2.5, 25], value=25))


@pytest.mark.parametrize("build, argument", [
    (lambda: timeline.timeline_explorer(bucket_cap_mb=30), "bucket_cap_mb"),
    (lambda: timeline.timeline_explorer(world_size=16), "world_size"),
    (lambda: topology.fabric_explorer(nodes=5), "nodes"),
    (lambda: topology.fabric_explorer(size_log2=40), "size_log2"),
    (lambda: decode.decode_explorer(sla_ms=50.5), "sla_ms"),
    (lambda: kvcache.kv_explorer(tokens=5000), "tokens"),
    (lambda: pipeline.pipeline_explorer(stages=0), "stages"),
    (lambda: training.training_explorer(dp=3), "dp"),
    (lambda: comm.comm_explorer(world_size=63), "world_size"),
    (lambda: shards.shards_explorer(concurrency=0), "concurrency"),
    (lambda: shards.shards_explorer(scenario="fast"), "scenario"),
])
def test_an_argument_no_control_can_show_is_refused_by_name(build, argument):
    with pytest.raises(ValueError, match=f"^{argument} must be") as err:
        build()
    assert "\n" not in str(err.value)


def test_fabric_busbw_panel_marks_the_chosen_node_count_and_size(monkeypatch):
    shown = {}
    real = topology.show
    monkeypatch.setattr(topology, "show", lambda image, caption, canvas, text: (shown.update(fig=canvas.fig),
                                                                                 real(image, caption, canvas, text)))
    box = topology.fabric_explorer("dgx-h100", nodes=3, algorithm="tree_chains", channels=4, size_log2=28)
    _by_description(box)["log2 S (bytes)"].value = 27
    right = shown["fig"].axes[1]
    labels = {line.get_label(): line for line in right.lines}
    chosen = [line for label, line in labels.items() if label.startswith("3 node(s), chosen")]
    assert chosen and chosen[0].get_linewidth() > max(labels[k].get_linewidth() for k in labels
                                                      if k.startswith(("1 node", "2 node", "8 node")))
    cluster = get_cluster("dgx-h100", 3)
    busbw = cost_of(build_on_cluster("all_reduce", "tree_chains", cluster, 4), cluster, 2**27).busbw
    (mark,) = [line for label, line in labels.items() if label.startswith("this run")]
    assert list(mark.get_xdata()) == [2**27] and mark.get_ydata()[0] == pytest.approx(busbw / 1e9)
    assert any(list(line.get_xdata()) == [2**27, 2**27] for line in right.lines)  # the size, as a vertical line


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("name, module", [("13 fabric", topology), ("14 blocks", serving), ("17 training", training),
                                          ("18 timeline", timeline), ("19 shards", shards)])
def test_figures_fit_a_notebook_at_1280_px_with_text_of_at_least_11_px(name, module, monkeypatch):
    figures = []
    real = module.show
    monkeypatch.setattr(module, "show", lambda image, caption, fig, text: (figures.append(fig.fig),
                                                                           real(image, caption, fig, text)))
    box = EXPLORERS[name]()
    width, height = _png_size(bytes(box.children[-1].value))
    assert width <= 1090 and height <= 560  # the output area of a notebook in a 1280 x 860 window
    texts = [t for t in figures[-1].findobj(Text) if t.get_visible() and t.get_text().strip()]
    assert texts
    small = {t.get_text(): t.get_fontsize() * EXPLORER_DPI / 72 for t in texts
             if t.get_fontsize() * EXPLORER_DPI / 72 < 11}
    assert not small, f"{name}: text below 11 px on screen: {small}"
