"""Figures and explorers of notebooks 14 (block tables) and 15 (scheduler timeline, latency against load)."""

import itertools

import matplotlib
import pytest

matplotlib.use("Agg")

from ringlab.serving import Request, SchedulerConfig, simulate  # noqa: E402
from ringlab.viz import serving  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.mark.parametrize("requests, prompt, shared, n, decode",
                         [c for c in itertools.product([1, 3], [1, 8, 13, 24], [0, 5, 8, 24], [1, 2, 4], [0, 1, 9])
                          if c[2] <= c[1]])
def test_fork_scenario_matches_its_closed_form(requests, prompt, shared, n, decode):
    bm, copied = serving.fork_scenario(requests, prompt, shared, n, decode)
    text = serving.block_summary(bm, requests, prompt, shared, n, decode)
    assert "(equal)" in text, text
    assert len(copied) == bm.copies  # every copy made a block of its own
    bm.check_invariants()


def test_block_picture_colours_shared_and_copied_blocks():
    bm, copied = serving.fork_scenario(requests=2, prompt_len=13, shared_len=8, n=2, decode=1)
    fig = serving.plot_block_tables(bm, copied)
    colours = {matplotlib.colors.to_hex(p.get_facecolor()) for p in fig.axes[0].patches}
    assert {serving._SHARED, serving._COPIED, serving._OWN} <= colours
    assert len(fig.axes[0].get_yticklabels()) == 4  # two requests x two samples


def test_timeline_marks_preemptions_and_thrown_away_prefill():
    requests = [Request(0, 0.0, tuple(range(512)), 200), Request(1, 1e-6, tuple(range(10_000, 10_512)), 200)]
    trace = simulate(requests, num_blocks=64, config=SchedulerConfig.naive())
    fig = serving.plot_timeline(trace)
    labels = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    assert "preemptions (2)" in labels and "prefill thrown away" in labels


def test_load_sweep_gives_one_row_per_rate():
    sweep = serving.load_sweep([5, 40], num_requests=40, num_blocks=600, prompt_len=100, output_len=50)
    assert sweep["rate"].tolist() == [5.0, 40.0]
    assert sweep["ttft_p99_s"][1] >= sweep["ttft_p99_s"][0] > 0
    assert len(serving.plot_latency_vs_load(sweep).axes) == 2


def test_explorers_build_and_redraw():
    box = serving.block_explorer()
    image = box.children[-1]
    first = image.value
    box.children[0].children[1].children[1].value = 4  # samples n
    assert image.value != first and "(equal)" in box.children[1].value
    box = serving.scheduler_explorer(num_requests=30)
    caption = box.children[1]
    assert "policy fixed" in caption.value and "30 requests" in caption.value
    box.children[0].children[1].children[0].value = "naive"
    assert "policy naive" in caption.value


def test_fork_scenario_refuses_a_shared_prefix_longer_than_the_prompt():
    with pytest.raises(ValueError, match="shared_len"):
        serving.fork_scenario(prompt_len=4, shared_len=5)
