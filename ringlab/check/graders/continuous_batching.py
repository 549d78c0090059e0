"""Grader for topic 15, one step of the continuous-batching scheduler (card 15).

15a compares the learner's plan for one step with the fixed policy of notebook 15. The reference is
written from what a correct step must satisfy, not as a scheduler loop: the running requests that
survive are the longest oldest-first prefix whose new blocks fit in the free pool plus what the
newer ones release (preempting is the only way to free a block, and the newest go first); the
admitted requests are the longest prefix of the queue whose prompts, plus one decode block, fit
above the watermark in what is left. The classic mistakes are the same description with one
setting changed (the watermark held back from growth, admission before growth, overtaking, admitted
blocks not subtracted, no decode room, no watermark); the grader names the one that reproduces the
learner's plans on every fixed case, and otherwise the rule the plan breaks.
"""

from __future__ import annotations

from ..engine import CaseFailure, run_grader
from ..exercise import Exercise


def _survivors(running: list, free_blocks: int, floor: int = 0) -> int:
    """How many of the oldest running requests keep running: the largest k such that the new blocks of
    the first k fit in ``free_blocks`` plus the blocks of running[k:], keeping ``floor`` blocks free
    whenever one is taken (0 in the policy). Keeping fewer frees more and needs less, so the test is
    monotone in k and the largest k is the fewest preemptions."""
    grows = [1 if r["needs_block"] else 0 for r in running]
    held = [r["blocks"] for r in running]

    def fits(k: int) -> bool:
        need = sum(grows[:k])
        return need == 0 or need <= free_blocks + sum(held[k:]) - floor

    return max(k for k in range(len(running) + 1) if fits(k))


def _admitted(waiting: list, free: int, watermark: int, reserve: int = 1, subtract: bool = True,
              fcfs: bool = True) -> list:
    """Ids admitted from ``free`` blocks. The policy: the longest prefix of the queue in which each
    request's prompt, plus ``reserve`` decode block, fits above the watermark in what the requests
    before it left. ``fcfs=False`` lets a request that fits overtake one that does not."""
    sizes = [w["blocks"] for w in waiting]

    def fits(m: int, used: int) -> bool:
        return sizes[m] + reserve <= free - (used if subtract else 0) - watermark

    if fcfs:
        prefix = max(j for j in range(len(waiting) + 1) if all(fits(m, sum(sizes[:m])) for m in range(j)))
        return [w["id"] for w in waiting[:prefix]]
    taken = []
    for m, w in enumerate(waiting):
        if fits(m, sum(sizes[i] for i in taken)):
            taken.append(m)
    return [waiting[m]["id"] for m in taken]


def policy_plan(running: list, waiting: list, free_blocks: int, watermark_blocks: int, *, growth_floor: bool = False,
                admit_first: bool = False, reserve: int = 1, subtract: bool = True, fcfs: bool = True,
                watermark: bool = True) -> dict:
    """The plan of one step under the policy (the defaults) or under one of the classic mistakes."""
    mark = watermark_blocks if watermark else 0
    free, admit = free_blocks, []
    if admit_first:  # admission sees the pool before the running requests take their blocks
        admit = _admitted(waiting, free, mark, reserve, subtract, fcfs)
        free -= sum(w["blocks"] for w in waiting if w["id"] in admit)
    kept = _survivors(running, free, watermark_blocks if growth_floor else 0)
    free += sum(r["blocks"] for r in running[kept:]) - sum(1 for r in running[:kept] if r["needs_block"])
    if not admit_first:
        admit = _admitted(waiting, free, mark, reserve, subtract, fcfs)
    return {"decode": [r["id"] for r in running[:kept]], "preempt": [r["id"] for r in reversed(running[kept:])],
            "admit": admit}


def expected_plan(running: list, waiting: list, free_blocks: int, watermark_blocks: int) -> dict:
    """The fixed policy (notebook 15): grow the running oldest first, preempting the newest when no
    block is free; then admit FCFS while prompt blocks + 1 decode block fit above the watermark."""
    return policy_plan(running, waiting, free_blocks, watermark_blocks)


def plan_cases() -> list[dict]:
    def run(*rows):
        return [{"id": i, "blocks": b, "needs_block": n} for i, b, n in rows]

    def wait(*rows):
        return [{"id": i, "blocks": b} for i, b in rows]

    return [
        dict(running=run((0, 3, False)), waiting=wait((1, 2)), free_blocks=5, watermark_blocks=0),
        dict(running=run((0, 32, True)), waiting=wait((1, 32)), free_blocks=32, watermark_blocks=0),  # notebook 15's livelock cycle
        dict(running=run((0, 4, True), (1, 2, False), (2, 3, True)), waiting=[], free_blocks=0, watermark_blocks=0),
        dict(running=run((0, 4, True), (1, 2, True)), waiting=wait((5, 1)), free_blocks=0, watermark_blocks=0),
        dict(running=run((0, 2, False), (1, 2, True)), waiting=[], free_blocks=0, watermark_blocks=0),
        dict(running=[], waiting=wait((0, 3), (1, 1), (2, 1)), free_blocks=6, watermark_blocks=1),
        dict(running=run((0, 1, True), (1, 1, True), (2, 1, True)), waiting=wait((3, 1)), free_blocks=1,
             watermark_blocks=0),
        dict(running=[], waiting=wait((0, 4), (1, 1)), free_blocks=4, watermark_blocks=0),
        dict(running=run((0, 5, True)), waiting=wait((1, 2)), free_blocks=3, watermark_blocks=0),
        dict(running=run((0, 2, True)), waiting=[], free_blocks=1, watermark_blocks=1),  # growth may use the watermark
        dict(running=run((0, 2, False), (1, 3, True)), waiting=wait((2, 1)), free_blocks=2, watermark_blocks=2),
        dict(running=[], waiting=wait((0, 2), (1, 2), (2, 2)), free_blocks=6, watermark_blocks=0),
        dict(running=run((0, 1, True)), waiting=wait((1, 5), (2, 1), (3, 1)), free_blocks=5, watermark_blocks=0),
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


def _mistakes(case: dict, got: dict, want: dict) -> list[tuple[dict, str]]:
    """The classic mistakes, each as a setting of :func:`policy_plan` and what to say when it is the one."""
    running, waiting, free, mark = case["running"], case["waiting"], case["free_blocks"], case["watermark_blocks"]
    size = {w["id"]: w["blocks"] for w in waiting}
    extra = [i for i in got["admit"] if i not in want["admit"]]
    first = extra[0] if extra else None
    queue = [w["id"] for w in waiting]
    before = queue[:queue.index(first)] if first in queue else []
    left = free + sum(r["blocks"] for r in running if r["id"] in want["preempt"]) - sum(
        1 for r in running if r["id"] in want["decode"] and r["needs_block"])
    blocked = next((i for i in before if i not in got["admit"]), None)
    return [
        (dict(growth_floor=True),
         f"you preempted {got['preempt']} to keep the watermark of {mark} block(s) free, but the running requests "
         f"may grow into the watermark: it holds back admission only. Preempt only when no block is free at all "
         f"({free} free, the running need {sum(1 for r in running if r['needs_block'])})"),
        (dict(admit_first=True),
         f"you admitted request {first if first is not None else got['admit'][:1]} against the {free} blocks free "
         f"before the running requests took theirs: the running requests grow before anyone is admitted, or a "
         f"newcomer takes the block the oldest request needs to progress"),
        (dict(fcfs=False),
         f"request {blocked} does not fit, and you admitted request {first} behind it: admission is FCFS, stop at "
         f"the first request that does not fit (no overtaking, or a long prompt starves behind short ones)"),
        (dict(subtract=False),
         f"you admitted request {first} (needs {size.get(first)} blocks) against the {left} blocks free before "
         f"admission: you did not subtract the blocks of the requests admitted before it ({before}), so together "
         f"they take more than is free"),
        (dict(reserve=0),
         f"you admitted request {first} (needs {size.get(first)} blocks) without reserving decode room: admission "
         f"must leave its first decode block plus the watermark of {mark} free (blocks + 1 <= free - watermark)"),
        (dict(watermark=False),
         f"you admitted request {first} (needs {size.get(first)} blocks) into the watermark: admission must leave "
         f"{mark} block(s) free (blocks + 1 <= free - watermark)"),
    ]


def _answer(fn, case: dict) -> dict | None:
    """The learner's plan for ``case`` as lists, or None when it raises or has the wrong shape."""
    try:
        got = fn([dict(r) for r in case["running"]], [dict(w) for w in case["waiting"]], case["free_blocks"],
                 case["watermark_blocks"])
        return {k: list(got[k]) for k in ("decode", "preempt", "admit")}
    except Exception:  # a probe only: the case itself reports the learner's error
        return None


def _named_mistake(fn, case: dict, got: dict, want: dict) -> str | None:
    """The mistake whose plans equal the learner's on this case and on every fixed case it answers."""
    matching = [(setting, text) for setting, text in _mistakes(case, got, want)
                if policy_plan(**case, **setting) == got]
    for setting, text in matching:
        probes = [(c, _answer(fn, c)) for c in plan_cases()]
        if all(answer == policy_plan(**c, **setting) for c, answer in probes if answer is not None):
            return text
    return matching[0][1] if matching else None


def _plan_diagnosis(case: dict, got: dict, want: dict) -> str:
    """The rule the plan breaks, read from the case when no single classic mistake explains it."""
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
    queue = [w["id"] for w in waiting]
    if any(i not in queue for i in got["admit"]) or len(set(got["admit"])) != len(got["admit"]):
        return f"admit should list ids of waiting requests, each once, in queue order; got {got['admit']}"
    if got["admit"] != sorted(got["admit"], key=queue.index):
        return f"admitted {got['admit']}: admit in queue order (FCFS), expected {want['admit']}"
    missing = [i for i in want["admit"] if i not in got["admit"]]
    if missing:
        return (f"request {missing[0]} fits (blocks + 1 <= free - watermark after the requests before it) but you "
                f"did not admit it: admit FCFS until the first request that does not fit")
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
        why = _named_mistake(fn, case, got, want) or _plan_diagnosis(case, got, want)
        raise CaseFailure(why + f" (you returned {got}, expected {want})")


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
