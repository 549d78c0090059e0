"""The pipeline grid refuses sizes it could not build, and its bound on the makespan holds."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc.pipeline import SCHEDULES, pipeline_schedule


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SCHEDULES), st.integers(1, 6), st.integers(1, 10), st.integers(1, 3), st.integers(1, 4),
       st.integers(1, 4), st.integers(1, 4))
def test_makespan_is_below_the_bound_the_guard_uses(schedule, p, m, v, t_f, t_b, t_w):
    v = v if schedule == "interleaved-1f1b" else 1
    try:
        grid = pipeline_schedule(p, m, schedule, v, t_f, t_b, t_w)
    except ValueError:  # shapes the schedule does not allow (e.g. interleaved needs M % P == 0)
        return
    assert grid.makespan <= (m * v + p - 1) * (t_f + t_b + t_w)


@pytest.mark.parametrize("kwargs", [dict(microbatches=10**8), dict(microbatches=8, t_f=10**9)])
def test_huge_grids_are_refused_before_simulating(kwargs):
    with pytest.raises(ValueError, match="bubble_fraction"):
        pipeline_schedule(4, schedule="1f1b", **kwargs)
