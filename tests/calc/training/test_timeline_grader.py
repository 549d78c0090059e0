"""Grader 18a (exposed communication of DDP buckets): the solution passes, each classic mistake is caught
and named, and the expected values are the simulated timeline's, checked here by hand on small cases."""

import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def grader():
    return importlib.import_module("ringlab.check.graders.overlap_timeline")


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"learner_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.exposed_comm


def grade(grader, fn):
    (exercise,) = grader.EXERCISES
    return exercise.grader(fn)


def test_the_worked_solution_passes(grader):
    result = grade(grader, _load(ROOT / "solutions" / "18_overlap_timeline.py"))
    assert result.passed, str(result)
    assert result.cases > len(grader.exposed_cases())  # the hypothesis cases ran too


def test_the_generated_exercise_is_the_solution_with_a_stub(grader):
    from ringlab.course.make_exercises import make_stub

    solution = (ROOT / "solutions" / "18_overlap_timeline.py").read_text()
    exercise = (ROOT / "exercises" / "18_overlap_timeline.py").read_text()
    assert exercise == make_stub(solution, {"exposed_comm": "18a"})
    result = grade(grader, _load(ROOT / "exercises" / "18_overlap_timeline.py"))
    assert result.status == "not attempted" and "18a" in result.message


@pytest.mark.parametrize("c, a, want", [
    ([2, 2, 2, 2], [1, 1, 1, 1], 1),  # compute-bound: only the last bucket shows
    ([1, 1, 1, 1], [2, 2, 2, 2], 5),  # comm-bound: a + (k - 1)(a - c) = 2 + 3
    ([1, 1, 1], [3, 0.5, 1], 2.5),  # lags 3, 0.5 + 2, 1 + 1.5
    ([0.5, 0.5, 3, 3], [1, 1, 1, 1], 1),  # lags 1, 1.5, 1, 1
    ([0, 2, 0], [1, 1, 1], 2),  # lags 1, 1, 1 + 1
])
def test_expected_values_are_the_hand_derived_lags(grader, c, a, want):
    case = {"backward_s": [x * 1e-3 for x in c], "allreduce_s": [x * 1e-3 for x in a]}
    assert case in grader.exposed_cases()
    grader.check_exposed(lambda *_: want * 1e-3, **case)  # raises CaseFailure if the reference disagreed


def _sum_all(c, a):
    return sum(a)


def _all_hidden(c, a):
    return 0.0


def _no_last_bucket(c, a):
    return sum(max(0.0, a[i] - c[i + 1]) for i in range(len(a) - 1))


def _behind_all_compute(c, a):
    return max(0.0, sum(a) - sum(c))


def _own_compute(c, a):
    return sum(max(0.0, x - y) for x, y in zip(a, c))


def _no_backlog(c, a):
    return a[-1] + sum(max(0.0, a[i] - c[i + 1]) for i in range(len(a) - 1))


def _slack_banked(c, a):  # the lag recurrence without its max(0, ...): idle NCCL time saved for later
    lag = a[0]
    for x, y in zip(c[1:], a[1:]):
        lag = y + lag - x
    return max(0.0, lag)


MISTAKES = [
    (_sum_all, "every all_reduce in full"),
    (_all_hidden, "its all_reduce always shows"),
    (_no_last_bucket, "leaves out the last bucket"),
    (_behind_all_compute, "hides communication behind all of the backward"),
    (_own_compute, "its own bucket"),
    (_no_backlog, "a backlog carries over"),
    (_slack_banked, "saved up"),
]


@pytest.mark.parametrize("mistake, named", MISTAKES, ids=[m.__name__ for m, _ in MISTAKES])
def test_each_classic_mistake_is_caught_and_named(grader, mistake, named):
    result = grade(grader, mistake)
    assert result.status == "wrong", str(result)
    assert "should be" in result.message and result.inputs
    # On the first fixed case where this mistake's value is its own (unlike the right answer and unlike the
    # mistakes listed before it), the grader must name it; on earlier cases it may name the one it equals.
    for case in grader.exposed_cases():
        values = grader.known_mistakes(case["backward_s"], case["allreduce_s"])
        want = grader.bucket_step(case["backward_s"], case["allreduce_s"]).exposed_total()
        got = mistake(case["backward_s"], case["allreduce_s"])
        texts = list(values)
        earlier = [values[t] for t in texts[:next(i for i, t in enumerate(texts) if named in t)]]
        if not grader._same(got, want) and not any(grader._same(got, v) for v in earlier):
            with pytest.raises(grader.CaseFailure, match=named):
                grader.check_exposed(mistake, **case)
            return
    pytest.fail(f"no fixed case separates {mistake.__name__} from the mistakes before it")


def test_bad_return_values_and_crashes_are_reported_not_raised(grader):
    for fn in (lambda c, a: "1 ms", lambda c, a: None, lambda c, a: float("nan"), lambda c, a: 1 / 0):
        assert grade(grader, fn).status == "wrong"
    assert grade(grader, None).status == "not attempted"


def test_a_learner_who_mutates_the_lists_does_not_change_the_reference(grader):
    def destructive(c, a):
        lag = 0.0
        while c:
            lag = a.pop(0) + max(0.0, lag - c.pop(0))
        return lag

    assert grade(grader, destructive).passed
