"""Grader for topic 21, serving real traffic (card 21).

* 21a ``prefix_hit_rate(requests, num_blocks) -> float``: the prefix-cache hit rate of a trace replayed one
  request at a time through vLLM v1's block pool.

The expected rate is :func:`ringlab.serving.prefix_hits.prefix_hit_curve` with ``policy="vllm-v1"`` (the one
home of the replay; its partial block per request is the exercise's), on hand-made chains, on the first
requests of the bundled Mooncake conversation trace at pools from the smallest that fits its longest
request to one that never evicts, and on random chains. When an answer is wrong the grader names the
classic mistake it matches, each computed by :func:`mistaken_rate`, ringlab's replay making that mistake: hits
counted past the first miss, nothing evicted, the most recently used block evicted, a request's blocks
freed first to last, requests with a hit counted instead of blocks, and hits returned instead of a rate.
"""

from __future__ import annotations

import math
import numbers
from functools import cache

from ringlab.serving.prefix_hits import (full_block_hashes, hits_per_request, infinite_cache_hit_rate,
                                         prefix_hit_curve)
from ringlab.serving.traces import load_trace, trace_path

from ..engine import CaseFailure, close, run_grader
from ..exercise import Exercise

TRACE = "mooncake-conv"

MISTAKES = {
    "past_miss": "that counts every cached id of a request, past its first miss; a lookup matches the longest "
                 "cached prefix only (vLLM v1 stops at the first miss)",
    "no_eviction": "that is the infinite-cache ceiling: nothing was evicted. A fresh block comes from the head of "
                   "the free queue and evicts the id it cached",
    "lifo": "that evicts the most recently freed block (the tail of the queue); take fresh blocks from the head, "
            "the least recently used",
    "first_to_last": "that frees a request's blocks first to last, so a prefix's head is evicted before its tail; "
                     "free them last block first",
    "requests": "that is the fraction of requests with a hit; the rate counts blocks: hit blocks / listed blocks",
    "hits": "that is the number of hit blocks; return hits / listed blocks",
}


@cache
def trace_requests(first: int) -> tuple[tuple[int, ...], ...]:
    """The full-block hash ids of the first ``first`` requests of the bundled Mooncake excerpt (cached)."""
    return tuple(tuple(ids) for ids in full_block_hashes(load_trace(trace_path(TRACE))[:first]))


def expected(requests, num_blocks: int) -> float:
    """The rate vLLM v1's block pool gives (ringlab's replay)."""
    return prefix_hit_curve(requests, [num_blocks], policy="vllm-v1")[num_blocks]


# The replay's flag that makes each mistake (``requests`` and ``hits`` replay correctly and report wrongly)
_FLAGS = {"past_miss": "past_miss", "lifo": "evict_newest", "first_to_last": "free_first_to_last"}


def mistaken_rate(requests, num_blocks: int, mistake: str) -> float:
    """What a replay making ``mistake`` (a key of :data:`MISTAKES`) returns. ``no_eviction`` is ringlab's
    infinite-cache ceiling; the others are ringlab's replay with that one rule broken (the expected answer always
    comes from :func:`expected`, never from here)."""
    if mistake not in MISTAKES:
        raise ValueError(f"mistake must be one of {', '.join(MISTAKES)}, got {mistake!r}")
    if mistake == "no_eviction":
        return infinite_cache_hit_rate(requests)
    flag = _FLAGS.get(mistake)
    per_request = hits_per_request(requests, num_blocks, **({flag: True} if flag else {}))
    if mistake == "requests":
        return sum(map(bool, per_request)) / len(per_request)
    if mistake == "hits":
        return sum(per_request)
    return sum(per_request) / sum(map(len, requests))


def _as_rate(got) -> float:
    if isinstance(got, bool) or not isinstance(got, numbers.Real) or not math.isfinite(float(got)):
        raise CaseFailure(f"return the hit rate as a float in [0, 1], got {got!r}")
    return float(got)


def hit_rate_cases() -> list[dict]:
    """Hand-made chains (one that tells the mistakes apart, the docstring's example, a shared system prompt,
    eviction order, a request whose ids match past a miss), then the Mooncake excerpt: 120 requests, and all 300 at the smallest pool, two
    between, and the ceiling."""
    hand = [
        ([[1], [2, 3], [1, 4, 5], [2, 3], [6]], 5),  # every mistake but past_miss gives its own rate here
        ([[1, 2], [1, 3], [1, 2]], 4),
        ([[1, 2], [1, 3], [1, 2]], 3),
        ([[10, 11, 12], [10, 11, 13], [10, 11, 14], [10, 11, 12]], 5),
        ([[1, 2, 3], [4], [5], [1, 2, 6]], 5),
        ([[1, 2, 3], [4, 5], [1, 2, 3], [4, 6], [1, 7]], 4),
        ([[1, 2, 3, 4], [5, 6], [7, 8], [1, 2, 3, 9]], 6),
        ([[1, 2, 3], [4, 2, 3]], 8),  # 2 and 3 after another prefix: cached, but not a prefix hit
        ([[7]], 2),
    ]
    cases = [dict(requests=r, num_blocks=n) for r, n in hand]
    cases += [dict(trace=TRACE, first=120, num_blocks=n) for n in (236, 1_500, 3_000)]
    cases += [dict(trace=TRACE, first=300, num_blocks=n) for n in (236, 3_000, 5_000, 7_000)]
    return cases


def hit_rate_strategy():
    """Hypothesis strategy: 1-12 requests, each an earlier request's prefix (possibly empty) and 0-4 new ids,
    so ids chain as Mooncake's do; a pool from the smallest that fits to three blocks more."""
    from hypothesis import strategies as st

    @st.composite
    def case(draw):
        requests, fresh = [], 100
        for _ in range(draw(st.integers(1, 12))):
            base = draw(st.sampled_from(requests)) if requests and draw(st.booleans()) else []
            keep = draw(st.integers(0, len(base)))
            new = draw(st.integers(0 if keep else 1, 4))
            requests.append([*base[:keep], *range(fresh, fresh + new)])
            fresh += new
        return dict(requests=requests, num_blocks=max(map(len, requests)) + 1 + draw(st.integers(0, 3)))

    return case()


def check_hit_rate(fn, num_blocks: int, requests=None, trace: str = "", first: int = 0) -> None:
    """21a: the hit rate of the vllm-v1 replay, the mistake named when the answer matches one."""
    if trace:
        requests = [list(ids) for ids in trace_requests(first)]
    want = expected(requests, num_blocks)
    answer = fn([list(ids) for ids in requests], num_blocks)
    got = _as_rate(answer)
    if close(got, want):
        return
    wrong = {text: mistaken_rate(requests, num_blocks, mistake) for mistake, text in MISTAKES.items()}
    why = "; or ".join(text for text, value in wrong.items() if close(got, value) and not close(want, value))
    listed = sum(map(len, requests))
    raise CaseFailure(f"the hit rate should be {want:.6g} ({round(want * listed)} of {listed} listed blocks hit), "
                      f"got {answer!r}" + (f"; {why}" if why else ""))


def _hit_rate(fn):
    return run_grader("21a", "prefix_hit_rate", fn, check_hit_rate, hit_rate_cases(), hit_rate_strategy(),
                      "the hit rate matches vLLM v1's block pool on hand-made chains, the Mooncake excerpt and "
                      "random chains")


EXERCISES = (
    Exercise("21a", "prefix_hit_rate", "Prefix-cache hit rate of a real trace", _hit_rate, (
        "Keep three things: the free queue (an OrderedDict of blocks, least recently used first), which block "
        "caches each id, and which id each block caches.",
        "Per request: walk its ids while they are cached (those blocks leave the queue); then take one block "
        "from the head for each remaining id and one for the partial block, evicting the id each one cached.",
        "Free the request's blocks in reverse order onto the tail (free[block] = None); count hit blocks and "
        "listed blocks, and return their ratio.",
    )),
)
