"""Figures and the explorer of ringlab.viz.training: they draw from train_plan and never print."""

import matplotlib
import pytest

matplotlib.use("Agg")

from ringlab.calc.training.layout import ParallelLayout  # noqa: E402
from ringlab.calc.training.plan import train_plan  # noqa: E402
from ringlab.viz.training import describe_plan, draw_plan, memory_parts, training_explorer  # noqa: E402


@pytest.fixture(scope="module")
def plan():
    return train_plan("llama-2-13b", ParallelLayout(dp=2, tp=4, pp=4, sequence_parallel=True), 4096, 1, 16,
                      "zero1", "selective", topology="dgx-h100")


def test_memory_parts_sum_to_each_stage(plan):
    parts = memory_parts(plan)
    for stage, m in enumerate(plan.memory):
        assert sum(parts[p][stage] for p in parts) == m.total


def test_figure_has_one_bar_group_per_stage_and_the_caption_names_the_busiest(plan):
    import matplotlib.pyplot as plt

    fig = draw_plan(plan)
    left = fig.axes[0]
    assert len(left.get_xticks()) == 4
    assert f"stage {plan.busiest}" in describe_plan(plan) and "MFU" in describe_plan(plan)
    plt.close(fig)


def test_explorer_reports_a_bad_layout_in_its_caption(capsys):
    box = training_explorer(model="llama-2-7b", seq_len=4096, dp=1, tp=8, pp=2)
    caption = box.children[3]
    degrees = box.children[1].children
    tp = next(d for d in degrees if d.description == "tp")
    tp.value = 64  # more than llama-2-7b's 32 heads
    assert "num_attention_heads" in caption.value
    tp.value = 8
    assert "GB per GPU" in caption.value
    assert capsys.readouterr().out == ""
