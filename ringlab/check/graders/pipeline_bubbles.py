"""Grader for topic 08, pipeline bubbles (card 08).

* 08a ``pipeline_bubble(stages, microbatches, schedule, virtual_stages, relative_to) -> fraction``.

Expected values are written out here from the closed forms (Narayanan et al. 2021, sec. 2.2), never
taken from ``ringlab.calc``. When an answer is wrong, the grader also evaluates the known wrong
formulas (wall-clock against ideal time, v forgotten, ...) and names the one the answer matches.
"""

from __future__ import annotations

from fractions import Fraction
from ..engine import CaseFailure, as_number, close, named_mistake, run_grader
from ..exercise import Exercise


BUBBLE_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")


def bubble_cases() -> list[dict]:
    """Card 08 (P=8, M=16) in every schedule and convention, then one stage, one micro-batch, v = 4."""
    cases = [{"stages": 8, "microbatches": 16, "schedule": s, "virtual_stages": 2 if s == "interleaved-1f1b" else 1,
              "relative_to": rel} for s in BUBBLE_SCHEDULES for rel in ("ideal", "total")]
    cases += [
        {"stages": 1, "microbatches": 4, "schedule": "1f1b", "virtual_stages": 1, "relative_to": "total"},
        {"stages": 4, "microbatches": 1, "schedule": "gpipe", "virtual_stages": 1, "relative_to": "ideal"},
        {"stages": 4, "microbatches": 8, "schedule": "interleaved-1f1b", "virtual_stages": 4, "relative_to": "total"},
        {"stages": 4, "microbatches": 8, "schedule": "interleaved-1f1b", "virtual_stages": 1, "relative_to": "ideal"},
        # v given to schedules without model chunks: it must not change their bubble
        {"stages": 8, "microbatches": 16, "schedule": "gpipe", "virtual_stages": 2, "relative_to": "ideal"},
        {"stages": 4, "microbatches": 8, "schedule": "1f1b", "virtual_stages": 4, "relative_to": "total"},
    ]
    return cases


def bubble_strategy():
    """Hypothesis strategy: P 1..32, M 1..128 (a multiple of P for interleaved), v 1..8 (ignored but for interleaved)."""
    from hypothesis import strategies as st

    def fix(case: dict) -> dict:
        if case["schedule"] == "interleaved-1f1b":
            case["microbatches"] = case["stages"] * max(1, case["microbatches"] // case["stages"])
        return case

    return st.fixed_dictionaries({
        "stages": st.integers(1, 32), "microbatches": st.integers(1, 128),
        "schedule": st.sampled_from(BUBBLE_SCHEDULES), "virtual_stages": st.integers(1, 8),
        "relative_to": st.sampled_from(("ideal", "total")),
    }).map(fix)


def check_bubble(fn, stages: int, microbatches: int, schedule: str, virtual_stages: int, relative_to: str) -> None:
    """08a: (P-1)/(vM) relative to ideal compute, (P-1)/(vM + P-1) of the wall clock (v = 1 unless interleaved)."""
    p, m = stages, microbatches
    v = virtual_stages if schedule == "interleaved-1f1b" else 1
    ideal, total = Fraction(p - 1, v * m), Fraction(p - 1, v * m + p - 1)
    want = ideal if relative_to == "ideal" else total
    got = as_number(fn(stages=p, microbatches=m, schedule=schedule, virtual_stages=virtual_stages,
                     relative_to=relative_to), "the bubble fraction")
    if close(got, float(want)):
        return
    vm = "v x M" if v > 1 else "M"
    formula = f"(P-1)/({vm})" if relative_to == "ideal" else f"(P-1)/({vm} + P-1)"
    if relative_to == "ideal" and v == 1:
        formula = "(P-1)/M"
    known = {}
    if schedule != "interleaved-1f1b" and virtual_stages > 1:  # checked first: v = 2 also looks like "halved"
        known[f"{schedule} has no model chunks, so virtual_stages = {virtual_stages} does not apply: only "
              f"interleaved-1f1b divides the bubble by it"] = (
            Fraction(p - 1, virtual_stages * m) if relative_to == "ideal" else Fraction(p - 1, virtual_stages * m + p - 1))
    known.update({
        "that is the bubble relative to the ideal compute time, (P-1)/M; of the wall clock it is "
        "bubble / (bubble + compute)": Fraction(p - 1, v * m),
        "that is the wall-clock share; relative to the ideal compute time it is (P-1)/M": total,
        "that is the non-interleaved value: interleaving divides the bubble by virtual_stages": Fraction(
            p - 1, m) if relative_to == "ideal" else Fraction(p - 1, m + p - 1),
        "1F1B has the same bubble as GPipe; what it saves is activation memory (at most P micro-batches in flight)":
            want / 2,
    })
    raise CaseFailure(f"{schedule} bubble relative to {relative_to} should be {formula} = {want} = {float(want):.6g}, "
                      f"got {got:.6g}{named_mistake(got, {k: float(x) for k, x in known.items() if x != want})}")


def _bubble(fn):
    return run_grader("08a", "pipeline_bubble", fn, check_bubble, bubble_cases(), bubble_strategy(),
                      "the bubble is right for every schedule, P, M, v and convention tried")


EXERCISES = (
    Exercise("08a", "pipeline_bubble", "Pipeline bubble fraction", _bubble, (
        "Each device idles while the first micro-batch's forward reaches it and while the last backward "
        "comes back: (P-1) stage-times of forward + backward per step, against M of useful work.",
        "GPipe and 1F1B have the same bubble; interleaving v chunks per device makes each stage-time v times "
        "shorter, so the bubble divides by v.",
        "bubble = (P-1)/v, compute = M (in the same unit); 'ideal' returns bubble / compute, 'total' "
        "returns bubble / (bubble + compute).",
    )),
)
