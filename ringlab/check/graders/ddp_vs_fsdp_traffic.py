"""Grader for topic 04, gradient traffic of DDP against FSDP (card 04).

* 04a ``fsdp_traffic_breakdown(strategy, n_params, world_size, bytes_per_param) -> {(phase,
  collective): bytes}``: DDP, FSDP SHARD_GRAD_OP and FULL_SHARD, per rank, ring collectives.

Expected values are written out here from the formulas (ZeRO paper sec. 7), not taken from
``ringlab.calc``; tests/check/graders/test_calc_graders.py checks that both agree. Wrong answers that match a known
mistake get a message naming it: FULL_SHARD counted like SHARD_GRAD_OP (2x instead of 3x (N-1)/N M),
an all-reduce counted as M, a missing (N-1)/N.
"""

from __future__ import annotations

from ..engine import CaseFailure, as_bytes, run_grader, within_a_byte
from ..exercise import Exercise

FWD_AG, BWD_AG, BWD_RS, BWD_AR = (("forward", "all_gather"), ("backward", "all_gather"),
                                  ("backward", "reduce_scatter"), ("backward", "all_reduce"))


# collective -> multiples of (N-1)/N x M each rank sends (a ring all-reduce = reduce-scatter + all-gather)
PLAN = {
    "ddp": {BWD_AR: 2},
    "fsdp_shard_grad_op": {FWD_AG: 1, BWD_RS: 1},
    "fsdp_full_shard": {FWD_AG: 1, BWD_AG: 1, BWD_RS: 1},
}


_KEY_ORDER = (FWD_AG, BWD_AG, BWD_RS, BWD_AR)


P2_CASE = {"n_params": 7_000_000_000, "world_size": 64, "bytes_per_param": 2}


def expected_breakdown(strategy: str, n_params: int, world_size: int, bytes_per_param: int) -> dict:
    """``{(phase, collective): bytes}`` one rank sends; exact since world_size divides n_params."""
    message = n_params * bytes_per_param
    return {key: factor * message * (world_size - 1) // world_size for key, factor in PLAN[strategy].items()}


def _missing_message(strategy: str, key: tuple, want: int, factor: int) -> str:
    if key == BWD_AG:
        return ("no ('backward', 'all_gather'): FULL_SHARD frees each unit's gathered parameters after its "
                "forward (reshard_after_forward=True), so backward must all-gather them again. That makes "
                f"3 x (N-1)/N x M = 1.5x DDP; counting only 2 x (N-1)/N x M is the SHARD_GRAD_OP / ZeRO-2 answer "
                f"(expected {want:,} B here)")
    return f"no {key}: {strategy} runs this collective, {factor} x (N-1)/N x M = {want:,} B per rank"


def _unexpected_message(strategy: str, key: tuple, got: float) -> str:
    if strategy == "fsdp_shard_grad_op" and key == BWD_AG:
        return ("SHARD_GRAD_OP keeps the parameters it gathered in forward until backward is done, so it does "
                "not all-gather them again: only ('forward', 'all_gather') and ('backward', 'reduce_scatter'), "
                f"2 x (N-1)/N x M in total; you report {got:,.0f} B for {key}")
    if strategy == "ddp":
        return (f"DDP runs a single collective, the all_reduce of the gradients in backward: report it as "
                f"('backward', 'all_reduce'), not {key}")
    return f"{strategy} runs no {key[1]} in {key[0]}, but you report {got:,.0f} B for it"


def _value_message(key: tuple, got: float, want: int, factor: int, message: int, case: dict) -> str:
    n, bpp = case["world_size"], case["bytes_per_param"]
    if n > 1 and within_a_byte(got, factor * message):
        return (f"{key}: {got:,.0f} B is {factor} x M: you forgot the (N-1)/N factor. In a ring each rank "
                f"already holds its own 1/N chunk and sends only the other N-1 chunks, so expect "
                f"{factor} x (N-1)/N x M = {want:,} B")
    if key == BWD_AR and within_a_byte(got, message):
        return (f"{key}: you counted the all_reduce as M = {message:,} B. A ring all_reduce is a reduce-scatter "
                f"plus an all-gather, each (N-1)/N x M, so a rank sends 2(N-1)/N x M = {want:,} B")
    if bpp > 1 and within_a_byte(got * bpp, want):
        return f"{key}: {got:,.0f} looks like elements: multiply by bytes_per_param ({bpp}) to get {want:,} B"
    return f"{key}: expected {want:,} B, got {got:,.0f} B ({got / want:.4g}x)" if want else \
        f"{key}: expected 0 B (one rank has nobody to send to), got {got:,.0f} B"


def check_fsdp_breakdown(fn, strategy: str, n_params: int, world_size: int, bytes_per_param: int) -> None:
    """04a: the learner's dict against :func:`expected_breakdown`; a missing key counts as 0 bytes."""
    case = {"world_size": world_size, "bytes_per_param": bytes_per_param}
    result = fn(strategy, n_params, world_size, bytes_per_param)
    if not isinstance(result, dict):
        raise CaseFailure(f"return a dict {{(phase, collective): bytes}}, got {type(result).__name__}")
    for key in result:
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] in ("forward", "backward")
                and key[1] in ("all_reduce", "all_gather", "reduce_scatter")):
            raise CaseFailure(f"keys should be (phase, collective) tuples such as ('forward', 'all_gather'), "
                              f"got {key!r}")
    want = expected_breakdown(strategy, n_params, world_size, bytes_per_param)
    got = {key: as_bytes(v, f"the value for {key}") for key, v in result.items()}
    message = n_params * bytes_per_param
    for key in sorted(set(want) | set(got), key=_KEY_ORDER.index):
        w, g = want.get(key, 0), got.get(key, 0.0)
        if within_a_byte(g, w):
            continue
        if key not in want:
            raise CaseFailure(_unexpected_message(strategy, key, g))
        factor = PLAN[strategy][key]
        if key not in got or (g == 0 and w > 0):
            raise CaseFailure(_missing_message(strategy, key, w, factor))
        raise CaseFailure(_value_message(key, g, w, factor, message, case))


def fsdp_cases() -> list[dict]:
    """Card 04's numbers first for each strategy, then N = 1, 2, odd, and large N, other element sizes."""
    shapes = [dict(P2_CASE), {"n_params": 1_000, "world_size": 1, "bytes_per_param": 2},
              {"n_params": 10, "world_size": 2, "bytes_per_param": 4},
              {"n_params": 3 * 1_000_003, "world_size": 3, "bytes_per_param": 2},
              {"n_params": 8 * 125_000_000, "world_size": 8, "bytes_per_param": 1},
              {"n_params": 70_000_001_024, "world_size": 1024, "bytes_per_param": 2}]
    return [{"strategy": s, **shape} for shape in shapes for s in PLAN]


def fsdp_strategy():
    """Hypothesis strategy of 04a cases: n_params drawn as world_size x shard size."""
    from hypothesis import strategies as st

    return st.fixed_dictionaries({
        "strategy": st.sampled_from(sorted(PLAN)), "world_size": st.integers(1, 4096),
        "shard": st.integers(1, 10**9), "bytes_per_param": st.sampled_from((1, 2, 4)),
    }).map(lambda d: {"strategy": d["strategy"], "n_params": d["world_size"] * d["shard"],
                      "world_size": d["world_size"], "bytes_per_param": d["bytes_per_param"]})


def _fsdp(fn):
    return run_grader("04a", "fsdp_traffic_breakdown", fn, check_fsdp_breakdown, fsdp_cases(), fsdp_strategy(),
                      "every collective's bytes per rank match: DDP 2(N-1)/N M, SHARD_GRAD_OP 2 x (N-1)/N M, "
                      "FULL_SHARD 3 x (N-1)/N M")


EXERCISES = (
    Exercise("04a", "fsdp_traffic_breakdown", "DDP vs FSDP traffic per collective",
             _fsdp, (
                 "Message M = n_params x bytes_per_param. In a ring, reduce_scatter and all_gather each make a rank "
                 "send (N-1)/N x M (every chunk but its own); all_reduce is one of each.",
                 "DDP all-reduces gradients in backward. FSDP all-gathers parameters before forward and "
                 "reduce-scatters gradients in backward. Which one gathers again in backward?",
                 "FULL_SHARD frees the gathered parameters after forward, so backward all-gathers them again: "
                 "three collectives, 1.5x DDP. SHARD_GRAD_OP keeps them until backward ends: two, the same as DDP.",
             )),
)
