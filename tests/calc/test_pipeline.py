"""Pipeline bubbles: closed forms (PROBLEMS.md P10) against the simulated schedule grid."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc.pipeline import (
    BACKWARD, FORWARD, IDLE, WEIGHT, bubble_fraction, bubble_time, peak_in_flight, pipeline_schedule,
)


# ---- worked numbers ---------------------------------------------------------------------

@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_p8_m16_worked_answer(schedule):
    assert bubble_fraction(8, 16, schedule) == pytest.approx(7 / 16)  # 0.4375
    assert bubble_fraction(8, 16, schedule, relative_to="total") == pytest.approx(7 / 23)
    assert round(bubble_fraction(8, 16, schedule, relative_to="total"), 4) == 0.3043


def test_interleaved_divides_by_v():
    assert bubble_fraction(8, 16, "interleaved-1f1b", virtual_stages=2) == pytest.approx(7 / 32)
    assert bubble_fraction(8, 16, "interleaved-1f1b", virtual_stages=4, relative_to="total") == pytest.approx(7 / 71)


def test_zb_h1_is_a_third_of_1f1b_with_equal_times():
    zb = bubble_fraction(8, 16, "zb-h1", t_f=1, t_b=1, t_w=1)
    assert zb == pytest.approx(7 / 48)
    assert zb == pytest.approx(bubble_fraction(8, 16, "1f1b") / 3)


def test_zb_h1_general_times_by_hand():
    # P=4, M=8: t_w <= min(t_f, t_b): (P-1)(t_f+t_b-t_w) = 3 * (3+2-1) = 12 over 8 * 6 = 48.
    assert bubble_time(4, 8, "zb-h1", t_f=3, t_b=2, t_w=1) == (12, 48)
    # A long W can no longer hide: the forward fill (P-1) t_f = 9 binds.
    assert bubble_time(4, 8, "zb-h1", t_f=3, t_b=1, t_w=4) == (9, 64)


# ---- the grid against the closed form -----------------------------------------------------

def _closed_form_idle(p, m, schedule, v, t_f, t_b, t_w):
    """Idle slots per stage in chunk units: (P-1) x the per-chunk op times (module table)."""
    if schedule == "zb-h1":
        return (p - 1) * max(t_f, t_b, t_f + t_b - t_w)
    return (p - 1) * (t_f + t_b + t_w)


@pytest.mark.parametrize("schedule, p, m, v", [
    ("gpipe", 4, 8, 1), ("gpipe", 8, 16, 1), ("gpipe", 5, 3, 1),
    ("1f1b", 4, 8, 1), ("1f1b", 8, 16, 1), ("1f1b", 6, 2, 1), ("1f1b", 1, 5, 1),
    ("interleaved-1f1b", 4, 8, 2), ("interleaved-1f1b", 8, 16, 2), ("interleaved-1f1b", 4, 12, 3),
    ("interleaved-1f1b", 2, 4, 4),
    ("zb-h1", 4, 8, 1), ("zb-h1", 8, 16, 1), ("zb-h1", 3, 3, 1),
])
def test_grid_idle_slots_equal_closed_form(schedule, p, m, v):
    grid = pipeline_schedule(p, m, schedule, virtual_stages=v)
    idle = _closed_form_idle(p, m, schedule, v, 1, 1, 1)
    assert grid.idle_slots().tolist() == [idle] * p
    for relative_to in ("ideal", "total"):
        assert grid.bubble_fraction(relative_to) == pytest.approx(
            bubble_fraction(p, m, schedule, v, relative_to=relative_to))
    assert grid.peak_in_flight().tolist() == peak_in_flight(p, m, schedule, v).tolist()


def test_p8_m16_grid_counts_exactly():
    grid = pipeline_schedule(8, 16, "1f1b", t_f=1, t_b=1, t_w=1)
    idle, total = int(grid.idle_slots().sum()), grid.kind.size
    assert Fraction(idle, total - idle) == Fraction(7, 16)
    assert Fraction(idle, total) == Fraction(7, 23)


@settings(max_examples=60, deadline=None)
@given(
    schedule=st.sampled_from(["gpipe", "1f1b", "interleaved-1f1b", "zb-h1"]),
    p=st.integers(1, 6), groups=st.integers(1, 3), v=st.integers(1, 3),
    t_f=st.integers(1, 3), t_b=st.integers(1, 3), t_w=st.integers(1, 3),
)
def test_grid_matches_closed_form_property(schedule, p, groups, v, t_f, t_b, t_w):
    m = p * groups  # a multiple of P (interleaved needs it) and >= P (zb-h1's closed form needs it)
    if schedule != "interleaved-1f1b":
        v = 1
    grid = pipeline_schedule(p, m, schedule, v, t_f, t_b, t_w)
    assert (grid.idle_slots() == _closed_form_idle(p, m, schedule, v, t_f, t_b, t_w)).all()
    # Chunk times x v are the stage times the closed form takes.
    expected = bubble_fraction(p, m, schedule, v, t_f=t_f * v, t_b=t_b * v, t_w=t_w * v)
    assert grid.bubble_fraction() == pytest.approx(expected)
    assert (grid.peak_in_flight() == peak_in_flight(p, m, schedule, v)).all()


@settings(max_examples=40, deadline=None)
@given(schedule=st.sampled_from(["gpipe", "1f1b"]), p=st.integers(1, 7), m=st.integers(1, 10))
def test_fewer_microbatches_than_stages_still_match(schedule, p, m):
    grid = pipeline_schedule(p, m, schedule)
    assert grid.bubble_fraction("total") == pytest.approx((p - 1) / (m + p - 1))


# ---- the grid obeys the dependency rules (checked on the grid, not in the simulator) -------

def _spans(grid):
    """{(kind, microbatch, chunk, stage): (start, end)} read back from the grid."""
    spans = {}
    for s in range(grid.stages):
        for t in range(grid.makespan):
            k = int(grid.kind[t, s])
            if k == IDLE:
                continue
            key = (k, int(grid.microbatch[t, s]), int(grid.chunk[t, s]), s)
            start, _ = spans.get(key, (t, t))
            spans[key] = (start, t + 1)
    return spans


@pytest.mark.parametrize("schedule, p, m, v", [
    ("gpipe", 4, 6, 1), ("1f1b", 4, 6, 1), ("interleaved-1f1b", 3, 6, 2), ("zb-h1", 4, 6, 1),
])
def test_grid_respects_dependencies(schedule, p, m, v):
    t_f, t_b, t_w = 1, 2, 1
    grid = pipeline_schedule(p, m, schedule, v, t_f, t_b, t_w)
    spans = _spans(grid)
    split = schedule == "zb-h1"
    b_len = t_b if split else t_b + t_w
    kinds = (FORWARD, BACKWARD, WEIGHT) if split else (FORWARD, BACKWARD)
    # Every op exactly once, with its full duration (contiguous: end - start == duration).
    assert len(spans) == len(kinds) * m * v * p
    for (k, mb, c, s), (start, end) in spans.items():
        assert end - start == {FORWARD: t_f, BACKWARD: b_len, WEIGHT: t_w}[k]
    last = v * p - 1  # virtual stage index g = chunk * P + stage
    for mb in range(m):
        for g in range(v * p):
            c, s = divmod(g, p)
            f = spans[(FORWARD, mb, c, s)]
            b = spans[(BACKWARD, mb, c, s)]
            if g > 0:
                cp, sp = divmod(g - 1, p)
                assert f[0] >= spans[(FORWARD, mb, cp, sp)][1]
            if g < last:
                cn, sn = divmod(g + 1, p)
                assert b[0] >= spans[(BACKWARD, mb, cn, sn)][1]
            assert b[0] >= f[1]
            if split:
                assert spans[(WEIGHT, mb, c, s)][0] >= b[1]


def test_1f1b_stage_order_is_megatrons():
    grid = pipeline_schedule(4, 8, "1f1b")
    text = grid.to_text().splitlines()
    ops0 = [cell for cell in text[0].split(": ")[1].split() if cell != ".."]
    # Stage 0: P-1 = 3 warm-up forwards, then F3 and alternating B/F, B ops two slots long.
    assert ops0[:8] == ["F0", "F1", "F2", "F3", "B0", "B0", "F4", "B1"]
    # Last stage: no warm-up, F and B alternate from the start.
    ops3 = [cell for cell in text[3].split(": ")[1].split() if cell != ".."]
    assert ops3[:6] == ["F0", "B0", "B0", "F1", "B1", "B1"]


def test_peak_in_flight_by_hand():
    assert peak_in_flight(4, 8, "gpipe").tolist() == [8, 8, 8, 8]
    assert peak_in_flight(4, 8, "1f1b").tolist() == [4, 3, 2, 1]
    assert peak_in_flight(4, 2, "1f1b").tolist() == [2, 2, 2, 1]
    assert peak_in_flight(4, 8, "zb-h1").tolist() == [4, 4, 4, 4]
    # Megatron warm-up 2(P-i-1) + (v-1)P, plus one: P=4, v=2 -> 11, 9, 7, 5 chunks.
    assert peak_in_flight(4, 8, "interleaved-1f1b", 2).tolist() == [11, 9, 7, 5]


def test_grid_codes_and_shape():
    grid = pipeline_schedule(3, 4, "gpipe", t_f=1, t_b=1, t_w=1)
    assert grid.kind.shape == (grid.makespan, 3) == grid.microbatch.shape == grid.chunk.shape
    assert grid.makespan == (4 + 2) * 3  # (M + P - 1)(t_f + t_b + t_w)
    assert ((grid.kind == IDLE) == (grid.microbatch == -1)).all()
    assert np.isin(grid.kind, [IDLE, FORWARD, BACKWARD]).all()


# ---- bad input ------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, match", [
    (dict(stages=0, microbatches=4), ValueError, "stages"),
    (dict(stages=4, microbatches=-1), ValueError, "microbatches"),
    (dict(stages=2.5, microbatches=4), TypeError, "stages"),
    (dict(stages=True, microbatches=4), TypeError, "stages"),
    (dict(stages=4, microbatches=8, schedule="1f1f"), ValueError, "1f1b"),
    (dict(stages=4, microbatches=8, schedule="1f1b", virtual_stages=2), ValueError, "interleaved"),
    (dict(stages=4, microbatches=6, schedule="interleaved-1f1b", virtual_stages=2), ValueError, "divisible"),
    (dict(stages=4, microbatches=3, schedule="zb-h1"), ValueError, "microbatches >= stages"),
    (dict(stages=4, microbatches=8, relative_to="wall"), ValueError, "relative_to"),
    (dict(stages=4, microbatches=8, t_f=0), ValueError, "t_f"),
    (dict(stages=4, microbatches=8, t_w=float("nan")), ValueError, "t_w"),
])
def test_bubble_fraction_rejects(kwargs, error, match):
    with pytest.raises(error, match=match):
        bubble_fraction(**kwargs)


def test_pipeline_schedule_rejects_fractional_slots():
    with pytest.raises(TypeError, match="t_b"):
        pipeline_schedule(4, 8, "1f1b", t_b=1.5)
    with pytest.raises(ValueError, match="relative_to"):
        pipeline_schedule(2, 2).bubble_fraction("wall")
