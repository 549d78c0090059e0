"""Explorer 19 and the download Gantt chart: every control redraws, both event logs draw, bad input is refused."""

import matplotlib
import pytest

from ringlab.viz._controls import controls
from ringlab.viz.shards import (
    SCENARIOS, SHARDS, draw_fetch_gantt, plot_throughput_vs_concurrency, shards_explorer, simulate_scenario,
    throughput_curve,
)

matplotlib.use("Agg")  # the figures are drawn off screen; pyplot is imported only when a figure is made


@pytest.mark.slow
def test_every_control_changes_the_figure_and_the_caption():
    box = shards_explorer()
    image, caption = box.children[-1], box.children[-2]
    moves = {"cap": "link cap", "concurrency K": 12, "deadline": "30 s"}
    for control in controls(box):
        before = (bytes(image.value), caption.value)
        control.value = moves.get(control.description, not control.value if isinstance(control.value, bool) else None)
        assert (bytes(image.value), caption.value) != before, control.description
    assert "cancelled at 30 s" in caption.value


def test_the_explorer_is_deterministic():
    a, b = shards_explorer(concurrency=6), shards_explorer(concurrency=6)
    assert a.children[-2].value == b.children[-2].value and bytes(a.children[-1].value) == bytes(b.children[-1].value)


def test_more_is_not_faster_under_a_link_or_a_throttling_server():
    _, _, steady = throughput_curve(SCENARIOS["link cap"])
    assert max(steady) == pytest.approx(min(steady))  # one stream already fills the link
    _, _, steady = throughput_curve(SCENARIOS["throttling server"])
    assert steady[-1] < steady[5]  # 16 streams get less than 6
    _, simulated, _ = throughput_curve(SCENARIOS["per-connection cap"])
    assert simulated[11] == pytest.approx(simulated[7])  # K = 12 takes two waves of 16 shards, as K = 8 does


def test_faults_retry_and_the_deadline_cancels():
    sched = simulate_scenario("per-connection cap", 4, faults=True)
    retried = {a.shard for a in sched.attempts if a.outcome in ("503", "reset")}
    assert retried == {2, 5} and sched.complete
    cut = simulate_scenario("per-connection cap", 4, faults=True, deadline=60.0)
    assert cut.cancelled_at == 60.0 and sum(a.outcome == "done" for a in cut.attempts) < SHARDS


def test_gantt_draws_the_real_fetchers_event_log():
    # the shape of ringlab.shards.fetch's Attempt records: file names, an index request, an end still open
    log = [{"shard": "model.safetensors.index.json", "slot": 0, "start": 0.0, "end": 0.01, "outcome": "ok"},
           {"shard": "model-00001-of-00002.safetensors", "slot": 0, "start": 0.01, "end": 0.2, "outcome": "retry"},
           {"shard": "model-00002-of-00002.safetensors", "slot": 1, "start": 0.01, "end": None, "outcome": "cancelled"},
           {"shard": "model-00001-of-00002.safetensors", "slot": 0, "start": 0.3, "end": 0.4, "outcome": "failed"}]
    fig = draw_fetch_gantt(log, 2, cancelled_at=0.4, unit="ms")
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["1", "1", "2", "idx"]
    assert [line.get_label() for line in ax.lines] == ["retry starts", "everything cancelled"]
    assert ax.get_xlim()[1] >= 400


@pytest.mark.parametrize("call, match", [
    (lambda: draw_fetch_gantt([], 2), "at least one"),
    (lambda: draw_fetch_gantt([{"shard": 0, "slot": 3, "start": 0, "end": 1, "outcome": "done"}], 2), "slot 3"),
    (lambda: draw_fetch_gantt([{"shard": 0, "slot": 0, "start": 0, "end": 1, "outcome": "lost"}], 2), "outcome"),
    (lambda: simulate_scenario("fast", 2), "scenario"),
    (lambda: shards_explorer(deadline="10 s"), "deadline"),
])
def test_bad_input_is_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
    with pytest.raises(TypeError, match="faults must be True or False"):
        shards_explorer(faults="yes")


def test_throughput_plot_has_a_curve_and_dots_per_scenario():
    fig = plot_throughput_vs_concurrency(mark=8)
    assert len(fig.axes[0].lines) == 2 * len(SCENARIOS) + 1
