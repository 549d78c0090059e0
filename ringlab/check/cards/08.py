"""Card 08 (Pipeline bubble): the values its text uses, and fresh pipeline shapes."""

from __future__ import annotations

from fractions import Fraction

from ringlab.calc import bubble_fraction, peak_in_flight, pipeline_schedule
from ringlab.check.cards import Ask

PARAMS = {"p": 8, "m": 16}  # the fixed card's numbers
STAGES = (2, 4, 8, 16)
MICRO_PER_STAGE = (2, 3, 4, 6, 8)  # M = k x P: interleaved 1F1B (Megatron-LM) needs M divisible by P

ASKS = (
    Ask("ideal", "bubble relative to the ideal compute time", unit="1", show="", rel_tol=0.01),
    Ask("total", "bubble as a fraction of the wall clock", unit="1", show="", rel_tol=0.01),
)


def values(p: int = 8, m: int = 16) -> dict:
    """Bubble of ``p`` stages and ``m`` micro-batches (``bubble_fraction``, simulated by ``pipeline_schedule``)."""
    v = 2
    sim = pipeline_schedule(p, m, "1f1b")
    wall = Fraction(p - 1, m + p - 1)
    inter_peak = int(peak_in_flight(p, m, "interleaved-1f1b", v)[0])
    return {
        "p": p, "m": m, "v": v, "p1": p - 1,
        "ideal": bubble_fraction(p, m), "total": bubble_fraction(p, m, relative_to="total"),
        "wall_frac": f"{wall.numerator}/{wall.denominator}",
        "slots": sim.makespan, "busy": sim.makespan - int(sim.idle_slots()[0]), "idle": int(sim.idle_slots()[0]),
        "sim_ideal": sim.bubble_fraction(),
        "gpipe_peak": int(peak_in_flight(p, m, "gpipe")[0]), "f1b_peak": int(peak_in_flight(p, m, "1f1b")[0]),
        "inter": bubble_fraction(p, m, "interleaved-1f1b", v),
        "inter_peak": inter_peak, "inter_peak_eq": inter_peak / v,
        "zb": bubble_fraction(p, m, "zb-h1"), "m4": 4 * m, "ideal_m4": bubble_fraction(p, 4 * m),
    }


def draw(rng) -> dict:
    """P from :data:`STAGES` and M = k x P with k from :data:`MICRO_PER_STAGE`."""
    p = int(rng.choice(STAGES))
    return {"p": p, "m": p * int(rng.choice(MICRO_PER_STAGE))}
