"""Grader for topic 15, one step of the continuous-batching scheduler (card 15).

15a compares the learner's plan for one step with the fixed policy of PROBLEMS.md P14, computed here
in a few lines, and names the rule broken: decode room not reserved, admission before growth, a
victim other than the newest.
"""

from __future__ import annotations

from ..engine import CaseFailure, run_grader
from ..exercise import Exercise

def expected_plan(running: list, waiting: list, free_blocks: int, watermark_blocks: int) -> dict:
    """The fixed policy (PROBLEMS.md P14): grow the running oldest first, preempting the newest when no
    block is free; then admit FCFS while prompt blocks + 1 decode block fit above the watermark."""
    alive = [dict(r) for r in running]
    free, decode, preempt = free_blocks, [], []
    for r in list(alive):
        if r not in alive:
            continue
        if r["needs_block"]:
            while free == 0:
                victim = alive.pop()
                preempt.append(victim["id"])
                free += victim["blocks"]
                if victim is r:
                    break
            if r not in alive:
                continue
            free -= 1
        decode.append(r["id"])
    admit = []
    for w in waiting:
        if w["blocks"] + 1 > free - watermark_blocks:
            break
        admit.append(w["id"])
        free -= w["blocks"]
    return {"decode": decode, "preempt": preempt, "admit": admit}


def plan_cases() -> list[dict]:
    def run(*rows):
        return [{"id": i, "blocks": b, "needs_block": n} for i, b, n in rows]

    def wait(*rows):
        return [{"id": i, "blocks": b} for i, b in rows]

    return [
        dict(running=run((0, 3, False)), waiting=wait((1, 2)), free_blocks=5, watermark_blocks=0),
        dict(running=run((0, 32, True)), waiting=wait((1, 32)), free_blocks=32, watermark_blocks=0),  # P14's cycle
        dict(running=run((0, 4, True), (1, 2, False), (2, 3, True)), waiting=[], free_blocks=0, watermark_blocks=0),
        dict(running=run((0, 4, True), (1, 2, True)), waiting=wait((5, 1)), free_blocks=0, watermark_blocks=0),
        dict(running=run((0, 2, False), (1, 2, True)), waiting=[], free_blocks=0, watermark_blocks=0),
        dict(running=[], waiting=wait((0, 3), (1, 1), (2, 1)), free_blocks=6, watermark_blocks=1),
        dict(running=run((0, 1, True), (1, 1, True), (2, 1, True)), waiting=wait((3, 1)), free_blocks=1,
             watermark_blocks=0),
        dict(running=[], waiting=wait((0, 4), (1, 1)), free_blocks=4, watermark_blocks=0),
        dict(running=run((0, 5, True)), waiting=wait((1, 2)), free_blocks=3, watermark_blocks=0),
    ]


def plan_strategy():
    from hypothesis import strategies as st

    @st.composite
    def case(draw):
        n_run = draw(st.integers(0, 6))
        running = [{"id": i, "blocks": draw(st.integers(1, 8)), "needs_block": draw(st.booleans())}
                   for i in range(n_run)]
        waiting = [{"id": n_run + i, "blocks": draw(st.integers(1, 8))} for i in range(draw(st.integers(0, 4)))]
        free = draw(st.integers(0, 10))
        if running and running[0]["needs_block"] and free == 0 and len(running) == 1:
            free = 1  # the oldest alone always has room (a request that cannot finish is rejected on arrival)
        return dict(running=running, waiting=waiting, free_blocks=free, watermark_blocks=draw(st.integers(0, 2)))

    return case()


def _plan_diagnosis(case: dict, got: dict, want: dict) -> str:
    running, waiting = case["running"], case["waiting"]
    if got["preempt"] != want["preempt"]:
        if want["preempt"] and got["preempt"] and got["preempt"][0] != want["preempt"][0]:
            first = got["preempt"][0]
            if running and first == running[0]["id"]:
                return (f"you preempted request {first}, the oldest running one: preempted whenever it needs a block, "
                        f"it can be evicted and recomputed for ever while newer work runs (a livelock for it). "
                        f"Preempt the newest running request ({want['preempt'][0]})")
            return (f"you preempted request {first}; the victim is the newest running request "
                    f"({want['preempt'][0]}), so that the oldest always progresses")
        if not got["preempt"]:
            return (f"no block is free for a decoding request, yet you preempted nobody: preempt the newest running "
                    f"request(s) {want['preempt']} until one is free")
        return f"preempted {got['preempt']}, expected {want['preempt']} (newest first, only while no block is free)"
    if got["decode"] != want["decode"]:
        return (f"decoding {got['decode']}, expected {want['decode']}: every running request that was not preempted "
                f"decodes, oldest first; one that needs a block takes it before anything is admitted")
    blocks = {w["id"]: w["blocks"] for w in waiting}
    extra = [i for i in got["admit"] if i not in want["admit"]]
    if extra:
        i = extra[0]
        return (f"you admitted request {i} (needs {blocks[i]} blocks) without reserving decode room: admission must "
                f"leave its first decode block plus the watermark of {case['watermark_blocks']} free "
                f"(blocks + 1 <= free - watermark), and the running requests grow before anyone is admitted")
    return (f"admitted {got['admit']}, expected {want['admit']}: admit FCFS while blocks + 1 <= free - watermark, "
            f"and stop at the first request that does not fit")


def check_plan(fn, running: list, waiting: list, free_blocks: int, watermark_blocks: int) -> None:
    case = dict(running=running, waiting=waiting, free_blocks=free_blocks, watermark_blocks=watermark_blocks)
    copies = ([dict(r) for r in running], [dict(w) for w in waiting])
    got = fn(copies[0], copies[1], free_blocks, watermark_blocks)
    if not isinstance(got, dict) or set(got) != {"decode", "preempt", "admit"}:
        raise CaseFailure(f"return a dict with keys decode, preempt, admit (lists of ids), got {got!r}")
    got = {k: list(v) for k, v in got.items()}
    want = expected_plan(running, waiting, free_blocks, watermark_blocks)
    if got != want:
        raise CaseFailure(_plan_diagnosis(case, got, want) + f" (you returned {got}, expected {want})")


def _plan(fn):
    return run_grader("15a", "plan_step", fn, check_plan, plan_cases(), plan_strategy(),
                      "your step plans match the fixed policy: grow the running first, preempt the newest, "
                      "admit FCFS with decode room reserved above the watermark")


EXERCISES = (
    Exercise("15a", "plan_step", "One continuous-batching step: admit, grow, preempt", _plan, (
                 "Work in two phases: first give every running request (oldest first) the block its next token "
                 "needs, then admit from the waiting queue with what is left.",
                 "When no block is free, preempt the newest running request (it may be the one asking). Its "
                 "blocks become free; the oldest therefore always progresses.",
                 "Admit in queue order while blocks + 1 <= free - watermark (the + 1 is the first decode "
                 "block), and stop at the first that does not fit: FCFS, no overtaking.",
             )),
)
