"""The collectives explorer and time plot: widgets re-render on every control, labels never overlap."""

import itertools

import pytest

pytest.importorskip("ipywidgets")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from ringlab.collectives.cost import alpha_beta_time, crossover  # noqa: E402
from ringlab.viz.collectives import (  # noqa: E402
    collectives_explorer,
    explorer_rows,
    label_levels,
    plot_collective_times,
    size_label,
)


@pytest.fixture(scope="module")
def explorer():
    return collectives_explorer(world_size=8, message_bytes=2**20, fabric="nvlink4")


def _controls(box):
    n_slider, m_slider, fabric, caption, image = box.children
    return n_slider, m_slider, fabric, caption, image


def test_explorer_has_described_controls_and_a_png(explorer):
    n_slider, m_slider, fabric, caption, image = _controls(explorer)
    assert (n_slider.description, m_slider.description, fabric.description) == ("world_size", "message", "fabric")
    assert image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ring" in caption.value and "rabenseifner" in caption.value


@pytest.mark.parametrize("control, new_value", [(0, 64), (2, "ib-ndr"), (1, 2**30)])
def test_moving_a_control_changes_the_image_and_the_table(explorer, control, new_value):
    widget = explorer.children[control]
    _, _, _, caption, image = _controls(explorer)
    before_png, before_table = image.value, caption.value
    old = widget.value
    widget.value = new_value
    try:
        assert image.value != before_png
        assert caption.value != before_table
    finally:
        widget.value = old
    assert image.value == before_png  # same controls, same picture: rendering is deterministic


def test_table_is_fastest_first_and_matches_the_cost_model():
    rows = explorer_rows("all_reduce", ("ring", "double_binary_tree"), 16, 2**10, "ib-ndr")
    times = {r["algorithm"]: r["seconds"] for r in rows}
    # 1 KiB on 16 ranks: ring pays 30 alphas, the tree 2 * 4 = 8 (plus a few bytes): tree first
    assert [r["algorithm"] for r in rows] == ["double_binary_tree", "ring"]
    assert times["ring"] == pytest.approx(30 * 5e-6 + (2 * 15 * 64) / 50e9)
    assert times["ring"] == alpha_beta_time("all_reduce", "ring", 16, 2**10, "ib-ndr")


def test_explorer_rejects_bad_arguments():
    with pytest.raises(ValueError, match="power of two"):
        collectives_explorer(message_bytes=1000)
    with pytest.raises(ValueError, match="nvlink4"):
        collectives_explorer(fabric="nvlink")
    with pytest.raises(ValueError, match="ring"):
        collectives_explorer(algorithms=("ring", "trees"))


def test_label_levels_stagger_only_neighbours():
    assert label_levels([]) == []
    assert label_levels([1e6, 1e9]) == [0, 0]
    assert label_levels([2.68e7, 2.55e7, 9e5]) == [1, 0, 0]  # input order kept, sorted internally
    assert label_levels([1e7, 1.1e7, 1.2e7]) == [0, 1, 2]


def _text_boxes(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return {t.get_text().strip(): t.get_window_extent(renderer) for t in fig.axes[0].texts}


def test_crossover_labels_do_not_overlap_at_64_ranks_on_nvlink4():
    cross = crossover("all_reduce", "nvlink4", 64)
    close = [cross["recursive_doubling"], cross["reduce_broadcast"]]
    assert 2e7 < min(close) and max(close) / min(close) < 1.1  # the two crossings near 25 MB
    fig = plot_collective_times("all_reduce", "nvlink4", 64)
    boxes = _text_boxes(fig)
    assert set(boxes) == {"direct", "recursive_doubling", "reduce_broadcast", "double_binary_tree"}
    for (a, box_a), (b, box_b) in itertools.combinations(boxes.items(), 2):
        assert not box_a.overlaps(box_b), f"labels {a} and {b} overlap"


def test_size_label_shows_both_units():
    assert size_label(2**26) == "64 MiB (67.1 MB)"
    assert size_label(2**30) == "1 GiB (1.07 GB)"
    assert size_label(2**10) == "1 KiB (1.02 kB)"
    assert size_label(512) == "512 B"
