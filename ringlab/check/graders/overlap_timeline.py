"""Grader for topic 18, the step timeline and exposed communication (card 18).

* 18a ``exposed_comm(backward_s, allreduce_s) -> seconds``: DDP buckets on one NCCL stream.

The expected value is what ringlab's step-timeline simulator measures for the same buckets
(:func:`ringlab.calc.training.timeline.bucket_step`, its ``exposed_total``): tasks placed on a compute
stream and an NCCL stream, never a closed form written here. When an answer is wrong the grader
evaluates the classic mistakes (all communication exposed, all hidden, the last bucket hidden too,
each bucket judged alone, an all_reduce overlapped with its own bucket's compute or the bucket's before,
idle stream time saved up) and names the one the answer matches; when several give the same number on
the case, the one that also matches the learner's answers on the other fixed cases.
"""

from __future__ import annotations

import math

from ringlab.calc.training.timeline import bucket_step, collective_time, ddp_buckets, model_layer_costs
from ringlab.topology import get_cluster

from ..engine import CaseFailure, as_number, run_grader
from ..exercise import Exercise

ABS_TOL = 1e-12  # seconds: a picosecond, far below any bucket time here


def _same(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=ABS_TOL)


def _ms(values) -> list[float]:
    return [v * 1e-3 for v in values]


def _model_case() -> dict:
    """Llama-3-8B on 64 H100s, 8 DGX H100 nodes whose rings leave each node on its 8 NDR rails (as notebook 18
    times it): torch DDP's 25 MiB buckets, backward at 50% of peak."""
    layers = model_layer_costs("llama-3-8b", 4096, 1, "h100-sxm", 0.5)
    buckets = ddp_buckets(layers)
    cluster = get_cluster("dgx-h100", 8)
    return {"backward_s": [sum(layers[i].backward_s for i in b) for b in buckets],
            "allreduce_s": [collective_time("all_reduce", sum(layers[i].grad_bytes for i in b), 64, cluster)
                            for b in buckets]}


def exposed_cases() -> list[dict]:
    """Both ends with equal buckets, then the cases where the usual shortcuts part from the timeline."""
    cases = [
        {"backward_s": _ms([2, 2, 2, 2]), "allreduce_s": _ms([1, 1, 1, 1])},  # compute-bound: only the last shows
        {"backward_s": _ms([1, 1, 1, 1]), "allreduce_s": _ms([2, 2, 2, 2])},  # comm-bound: 2 + 3 x (2 - 1)
        {"backward_s": _ms([3]), "allreduce_s": _ms([2])},  # one bucket: nothing to hide behind
        {"backward_s": _ms([1, 1, 1]), "allreduce_s": _ms([3, 0.5, 1])},  # a backlog drained by slack
        {"backward_s": _ms([0.5, 0.5, 3, 3]), "allreduce_s": _ms([1, 1, 1, 1])},  # a backlog that clears
        {"backward_s": _ms([0, 2, 0]), "allreduce_s": _ms([1, 1, 1])},  # layers without backward work
        {"backward_s": _ms([1, 2, 3]), "allreduce_s": [0.0, 0.0, 0.0]},  # one rank: nothing to reduce
        {"backward_s": _ms([1, 3, 1, 1]), "allreduce_s": _ms([1, 2, 2.5, 0.5])},  # own compute vs next compute
    ]
    cases.append(_model_case())
    return cases


def exposed_strategy():
    """Hypothesis strategy: 1..12 buckets, compute and all_reduce times on a 10 us grid from 0 to 5 ms."""
    from hypothesis import strategies as st

    def case(pairs):
        return {"backward_s": [c * 1e-5 for c, _ in pairs], "allreduce_s": [a * 1e-5 for _, a in pairs]}

    return st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500)), min_size=1, max_size=12).map(case)


def known_mistakes(backward_s: list[float], allreduce_s: list[float]) -> dict[str, float]:
    """The classic wrong answers for these buckets, explanation -> value (first match is reported)."""
    c, a, k = backward_s, allreduce_s, len(backward_s)
    want = bucket_step(backward_s, allreduce_s).exposed_total()
    next_overlap = sum(max(0.0, a[i] - c[i + 1]) for i in range(k - 1))
    before = 0.0  # the backlog drained by the compute of the bucket before each all_reduce's own
    for i in range(k):
        before = a[i] + max(0.0, before - (c[i - 1] if i else 0.0))
    return {
        "that is every all_reduce in full, as if none overlapped the backward: bucket i's all_reduce runs "
        "while later buckets are still being computed": sum(a),
        "that says all communication hides, but the last bucket is complete only when the backward ends: "
        "its all_reduce always shows": 0.0,
        "that leaves out the last bucket: it is complete only when the backward ends, so its all_reduce "
        "cannot overlap anything and shows in full after the backlog": want - a[-1],
        "that hides communication behind all of the backward, max(0, sum(allreduce) - sum(backward)); an "
        "all_reduce can only overlap compute that runs after its bucket is complete": max(0.0, sum(a) - sum(c)),
        "that compares each all_reduce with the compute that produced its own bucket; it can only overlap "
        "the compute that comes after it": sum(max(0.0, a[i] - c[i]) for i in range(k)),
        "that drains all_reduce i-1's backlog with the previous bucket's compute, backward_s[i-1], which ran "
        "before that all_reduce could start; the backlog overlaps only the compute of bucket i, which runs after "
        "bucket i-1 is complete (lag = allreduce_s[i] + max(0, lag - backward_s[i]))": before,
        "that lets idle time on the NCCL stream be saved up for later buckets: when the stream has nothing "
        "to send it waits, so the lag never goes below zero (max(0, ...) at every bucket)":
            max(0.0, sum(a) - sum(c[1:])),
        "that judges each bucket alone against the next bucket's compute; with one NCCL stream a backlog "
        "carries over: an all_reduce starts only when the one before it has finished": a[-1] + next_overlap,
    }


def _probe_cases() -> list[dict]:
    return exposed_cases()[:-1]  # the fixed buckets, without the model case (it needs the calculators)


def _named_mistake(fn, got: float, want: float, mistakes: dict[str, float]) -> str:
    """The explanation whose value equals ``got`` here and the learner's answer on every fixed case (when
    several classic mistakes give the same number on this case); else the first that equals ``got``."""
    matching = [why for why, value in mistakes.items() if _same(got, value) and not _same(value, want)]
    if len(matching) > 1:
        answers = []
        for case in _probe_cases():
            try:
                answers.append((case, float(fn(list(case["backward_s"]), list(case["allreduce_s"])))))
            except Exception:  # a probe only: the case itself reports the learner's error
                continue
        for why in matching:
            if all(_same(value, known_mistakes(**case)[why]) for case, value in answers):
                return why
    return matching[0] if matching else ""


def check_exposed(fn, backward_s: list[float], allreduce_s: list[float]) -> None:
    """18a: the exposed time ringlab's timeline measures for these buckets."""
    want = bucket_step(backward_s, allreduce_s).exposed_total()
    got = as_number(fn(list(backward_s), list(allreduce_s)), "the exposed communication")
    if _same(got, want):
        return
    why = _named_mistake(fn, got, want, known_mistakes(backward_s, allreduce_s))
    raise CaseFailure(f"exposed communication should be {want * 1e3:.6g} ms (the simulated timeline: backward "
                      f"{sum(backward_s) * 1e3:.6g} ms, all_reduces {sum(allreduce_s) * 1e3:.6g} ms in all), got "
                      f"{got * 1e3:.6g} ms" + (f"; {why}" if why else ""))


def _exposed(fn):
    return run_grader("18a", "exposed_comm", fn, check_exposed, exposed_cases(), exposed_strategy(),
                      "the exposed time matches the simulated timeline for every set of buckets tried")


EXERCISES = (
    Exercise("18a", "exposed_comm", "Exposed communication of DDP buckets", _exposed, (
        "Follow the NCCL stream, not the totals. When can bucket i's all_reduce start? When its bucket is "
        "complete, and when the all_reduce before it has finished. When does the backward end?",
        "Keep one number: the lag, how long after bucket i was complete its all_reduce ends. The next bucket's "
        "compute (backward_s[i+1]) eats into that lag before the next all_reduce can start.",
        "lag = 0; for each bucket: lag = allreduce + max(0, lag - backward); the answer is the last lag (the "
        "backward ends exactly when the last bucket is complete).",
    )),
)
