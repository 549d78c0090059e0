"""The explain figure and the notebook 16 explorer: what they show follows what was pasted."""

import matplotlib
import pytest

matplotlib.use("Agg")

from nccl_fixtures import fixture_text  # noqa: E402

from ringlab.nccl import explain_texts  # noqa: E402
from ringlab.viz.nccl import explain_explorer, explain_html, plot_busbw  # noqa: E402

A100 = "a100_sxm4_8gpu_nccl_tests_2_19.txt"
WRONG = "nccl_tests_369_gh200_2node_wrong.txt"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_figure_draws_every_row_and_the_ceiling():
    (report,) = explain_texts([(A100, fixture_text(A100))])
    ax = plot_busbw([report]).axes[0]
    measured = next(line for line in ax.lines if line.get_label().endswith("measured"))
    assert list(measured.get_xdata()) == sorted(r.size for r in report.run.rows)
    assert max(measured.get_ydata()) == pytest.approx(report.peak_busbw / 1e9)
    ceiling = next(line for line in ax.lines if line.get_label().startswith("ceiling"))
    assert ceiling.get_ydata()[0] == pytest.approx(300.0)  # A100 SXM NVLink 3: 300 GB/s per direction


def test_report_html_for_empty_unreadable_and_real_text():
    assert "paste" in explain_html("   ")[0]
    page, reports = explain_html("hello\nworld\n")
    assert reports == [] and "not nccl-tests output" in page and "Traceback" not in page
    page, reports = explain_html(fixture_text(WRONG), WRONG)
    assert len(reports) == 1 and "[correctness-failure]" in page and page.startswith("<pre>")


def test_explorer_follows_the_picked_example():
    examples = {A100: fixture_text(A100), WRONG: fixture_text(WRONG)}
    box = explain_explorer(examples)
    picker, text, button, report, image = box.children
    assert text.value == examples[A100] and A100 in report.value and bytes(image.value).startswith(b"\x89PNG")
    first = image.value
    picker.value = WRONG
    assert text.value == examples[WRONG] and "[correctness-failure]" in report.value and bytes(image.value) != bytes(first)
    text.value = "not a run"
    button.click()
    assert "not nccl-tests output" in report.value and bytes(image.value) == b""


def test_explorer_refuses_examples_that_are_not_text():
    with pytest.raises(ValueError, match="examples"):
        explain_explorer({"x": b"bytes"})
    empty = explain_explorer()
    assert empty.children[0].disabled and "paste" in empty.children[3].value
