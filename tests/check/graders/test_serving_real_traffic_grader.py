"""21a's grader: its expected rates and the rates of the mistakes it names, derived by hand on the case that tells
them apart, and on the Mooncake excerpt from counts written here."""

import pytest

from ringlab.check import grade
from ringlab.check.graders.serving_real_traffic import (MISTAKES, expected, hit_rate_cases, mistaken_rate,
                                                        trace_requests)

# Five requests, a pool of 5 blocks (queue head first). Right: [1] takes 0 (and 1, partial), frees 1, 0: queue
# [2, 3, 4, 1, 0]. [2, 3] takes 2, 3, 4. [1, 4, 5] hits 1 (block 0); 4 -> 1, 5 -> 4, partial -> 3 evicts id 3.
# [2, 3] hits 2 and misses 3. [6] misses: 2 hits of 9. No eviction: [1, 4, 5] hits 1, [2, 3] hits both: 3 of 9.
# Two requests of five hit: 0.4. LIFO takes from the tail: [2, 3] evicts id 1, [1, 4, 5] evicts 2 and 3: 0.
# First to last: after [1, 4, 5] the queue is [4, 0, 1, 2, 3]; 5 -> 2 evicted id 2, so [2, 3] misses: 1 of 9.
CASE = ([[1], [2, 3], [1, 4, 5], [2, 3], [6]], 5)
BY_HAND = {"no_eviction": 3 / 9, "requests": 0.4, "hits": 2, "lifo": 0.0, "first_to_last": 1 / 9,
           "past_miss": 2 / 9}


def test_expected_and_mistakes_by_hand():
    assert hit_rate_cases()[0] == dict(requests=CASE[0], num_blocks=CASE[1])
    assert expected(*CASE) == pytest.approx(2 / 9)
    assert set(BY_HAND) == set(MISTAKES)
    for mistake, value in BY_HAND.items():
        assert mistaken_rate(*CASE, mistake) == pytest.approx(value), mistake
    # ids 2 and 3 cached after another prefix: counted only by the mistake, never by vLLM's prefix match
    assert expected([[1, 2, 3], [4, 2, 3]], 8) == 0 and mistaken_rate([[1, 2, 3], [4, 2, 3]], 8, "past_miss") == 2 / 6


def test_mooncake_cases_span_the_curve():
    full = trace_requests(300)
    seen, ceiling, listed = set(), 0, 0
    for ids in full:  # chained ids: the infinite cache hits every id listed before
        ceiling += sum(i in seen for i in ids)
        seen.update(ids)
        listed += len(ids)
    assert listed == 8_190 and max(map(len, full)) == 235
    smallest = expected(full, 236)  # only the system prompt's block survives: the other 299 requests hit it
    assert smallest == pytest.approx(sum(ids[0] == full[0][0] for ids in full[1:]) / listed) == pytest.approx(299 / 8190)
    assert smallest < expected(full, 3_000) < expected(full, 5_000) < expected(full, 7_000) == pytest.approx(ceiling / listed)
    sizes = [c["num_blocks"] for c in hit_rate_cases() if c.get("first") == 300]
    assert min(sizes) == 236 and expected(full, max(sizes)) == pytest.approx(ceiling / listed)


@pytest.mark.parametrize("answer, words", [(lambda r, n: None, "return the hit rate as a float"),
                                           (lambda r, n: True, "return the hit rate as a float"),
                                           (lambda r, n: 0.123, "should be 0.222222 (2 of 9 listed blocks hit)")])
def test_bad_answers_are_named(answer, words):
    result = grade("21a", answer)
    assert result.status == "wrong" and words in result.message, str(result)
    if "should be" in words:
        assert "; that" not in result.message  # a wrong number that is no known mistake is not blamed on one
