"""Topic 20's figure and table: one bar per ranked layout adding up to its step, and the table of the ranking."""

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from ringlab.plan.space import TrainJob  # noqa: E402
from ringlab.plan.train import plan_train  # noqa: E402
from ringlab.viz.plan import EXPLORER_SPACE, describe_search, plot_ranking, ranking_table  # noqa: E402


@pytest.fixture(scope="module")
def search():
    return plan_train(TrainJob("llama-3-8b", 16, "dgx-h100", 4096, 64), 4, EXPLORER_SPACE)


def test_bars_add_up_to_each_step(search):
    fig, ax = plt.subplots()
    plot_ranking(search, ax)
    ends = {}
    for patch in ax.patches:
        y = round(patch.get_y() + patch.get_height() / 2)
        ends[y] = max(ends.get(y, 0.0), patch.get_x() + patch.get_width())
    assert [ends[y] for y in sorted(ends)] == pytest.approx([r.step_seconds for r in search.layouts], rel=1e-9)
    assert len(ax.get_yticklabels()) == len(search.layouts)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "matmuls" in labels and len(labels) == len(set(labels))
    plt.close(fig)


def test_table_and_caption_name_the_best(search):
    html = ranking_table(search)
    assert html.count("<tr>") == len(search.layouts) + 1
    assert search.best.candidate.describe() in describe_search(search)


def test_a_redraw_on_the_same_axes_keeps_the_fastest_on_top(search):
    from ringlab.viz._redraw import clear_plotted

    fig, ax = plt.subplots()
    for _ in range(2):  # the explorer clears and draws again on its axes
        clear_plotted(ax)
        plot_ranking(search, ax)
        bottom, top = ax.get_ylim()
        assert top < bottom  # y grows downwards: rank 1 at the top
    plt.close(fig)
