"""The cluster pictures: what they draw equals the model's numbers; the explorer redraws."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")
import matplotlib

matplotlib.use("Agg")

from ringlab.topology import build_on_cluster, get_cluster  # noqa: E402
from ringlab.viz import topology as viz  # noqa: E402


def test_link_busy_puts_the_bottleneck_at_one_and_nvlink_at_its_share():
    c = get_cluster("dgx-h100", 2)
    from ringlab.topology import link_loads

    busy = viz.link_busy(c, link_loads(build_on_cluster("all_reduce", "ring_channels", c), c, 16 * 8 * 1000).bytes)
    assert np.allclose(busy["nic tx"], 1.0)
    assert np.allclose(busy["nvlink tx"], (7 / 8 / 450) / (1 / 8 / 50))  # 0.78: NVLink waits on the rails


def test_heat_map_rows_and_busbw_curve_reach_the_line_rate():
    c = get_cluster("dgx-h100", 2)
    fig = viz.plot_cluster_load(c, build_on_cluster("all_reduce", "ring", c), 2**30)
    grid = fig.axes[0].images[0].get_array()
    assert grid.shape[0] == 6 and np.nanmax(grid) == 1.0
    curve, line = viz.busbw_curve("dgx-h100", 2, "all_reduce", "ring_channels")
    assert line == pytest.approx(400e9) and curve[-1] < line and curve[-1] > 0.97 * line
    assert (np.diff(curve) > 0).all()


def test_fabric_explorer_redraws_and_names_what_cannot_run():
    box = viz.fabric_explorer("dgx-h100", nodes=2)
    (topo, nodes, algo), (chan, size), caption, image = (list(box.children[0].children), list(box.children[1].children),
                                                          box.children[2], box.children[3])
    before = image.value
    chan.value = 1
    assert image.value != before and "line rate 50.0 GB/s" in caption.value  # one channel: one rail per node
    algo.value = "nvls"
    assert "one NVLink domain" in caption.value
    nodes.value = 1
    assert "nvls" in caption.value and "line rate" in caption.value
