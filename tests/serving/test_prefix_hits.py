"""Prefix-cache hit rate against pool size: hand-worked replays, the never-evicting ceiling recomputed here,
agreement with BlockManager itself, monotonicity for chained hashes, errors, and the bundled Mooncake excerpt."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.serving import BlockManager
from ringlab.serving.prefix_hits import full_block_hashes, hits_per_request, infinite_cache_hit_rate, prefix_hit_curve
from ringlab.serving.traces import TraceRequest, load_trace, trace_path

POLICIES = ("uncached-first", "vllm-v1")


def ceiling(requests):
    """Each request's longest prefix some earlier request listed, over all blocks (a set of seen prefixes)."""
    seen, hits = set(), 0
    for hashes in requests:
        prefixes = [tuple(hashes[:i + 1]) for i in range(len(hashes))]
        hits += next((i for i, p in enumerate(prefixes) if p not in seen), len(prefixes))
        seen.update(prefixes)
    return hits / sum(map(len, requests))


class KeyedPrompt(list):
    """n blocks of 2 placeholder tokens and a partial one, keyed by the given hashes."""

    def __init__(self, keys):
        super().__init__(range(2 * len(keys) + 1))
        self.keys = list(keys)

    def block_keys(self, block_size):
        return self.keys


def block_manager_rate(requests, size, policy):
    bm = BlockManager(size, 2, policy=policy)
    for i, hashes in enumerate(requests):
        bm.allocate(i, KeyedPrompt(hashes))
        bm.free(i)
    return bm.prefix_cache_hits / sum(map(len, requests))


def chains(tokens_lists):
    """Chained hashes: block i of a request is named by its whole prefix."""
    return [[tuple(t[:i + 1]) for i in range(len(t))] for t in tokens_lists]


def test_hand_worked_replays():
    """[1,2], [3], [1,2] in 3 blocks: the second request's partial block evicts 2 under both policies (one
    hit of five); in 4 blocks nothing is evicted (two hits, the ceiling). [1,2], [3], [4], [1,2]: in 4 blocks
    vllm-v1's queue also holds the partial blocks, so [4] evicts both 2 and 1 (no hit), while uncached-first
    reuses the partial blocks and loses 2 only (one hit of six); in 5 blocks 1 survives vllm-v1 and both
    survive uncached-first."""
    short = [[1, 2], [3], [1, 2]]
    for policy in POLICIES:
        assert prefix_hit_curve(short, [3, 4], policy) == {3: 1 / 5, 4: 2 / 5}
    assert infinite_cache_hit_rate(short) == 2 / 5
    longer = [[1, 2], [3], [4], [1, 2]]
    assert prefix_hit_curve(longer, [4, 5], "vllm-v1") == {4: 0, 5: 1 / 6}
    assert prefix_hit_curve(longer, [4, 5], "uncached-first") == {4: 1 / 6, 5: 2 / 6}


requests_st = st.lists(st.lists(st.integers(0, 9), unique=True, max_size=6), min_size=1, max_size=12).filter(any)
tokens_st = st.lists(st.lists(st.integers(0, 2), max_size=6), min_size=1, max_size=14).filter(any)


@settings(max_examples=60, deadline=None)
@given(requests_st, st.integers(0, 6))
def test_the_replay_gives_block_managers_hits(requests, extra):
    """Any distinct hashes, chained or not: the lean replay hits what BlockManager hits."""
    size = max(map(len, requests)) + 1 + extra
    for policy in POLICIES:
        assert prefix_hit_curve(requests, [size], policy)[size] == block_manager_rate(requests, size, policy)


@settings(max_examples=60, deadline=None)
@given(requests_st, st.integers(0, 6))
def test_each_requests_hits_are_block_managers(requests, extra):
    """hits_per_request: what each allocate on BlockManager(policy="vllm-v1") adds to its hit counter."""
    size = max(map(len, requests)) + 1 + extra
    bm, want = BlockManager(size, 2, policy="vllm-v1"), []
    for i, hashes in enumerate(requests):
        before = bm.prefix_cache_hits
        bm.allocate(i, KeyedPrompt(hashes))
        want.append(bm.prefix_cache_hits - before)
        bm.free(i)
    assert hits_per_request(requests, size) == want


def test_each_flag_breaks_its_rule():
    """[1,2,3], [1,4], [1,2,3] in 5 blocks, worked by hand. The queue after the first request is 4, partial, 3, 2,
    1 (freed last to first); the second finds 1 and takes 4 and the partial block's, so the third finds 1, 2, 3.
    Taking from the tail (evict_newest) or freeing first to last both hand the second request the blocks of 2
    and 3: the third finds 1 only. past_miss counts 2 of [3, 2] although 3 missed."""
    trace = [[1, 2, 3], [1, 4], [1, 2, 3]]
    assert hits_per_request(trace, 5) == [0, 1, 3]
    assert hits_per_request(trace, 5, evict_newest=True) == [0, 1, 1]
    assert hits_per_request(trace, 5, free_first_to_last=True) == [0, 1, 1]
    assert hits_per_request(trace, 5, past_miss=True) == [0, 1, 3]
    assert hits_per_request([[1, 2], [3, 2]], 5) == [0, 0]
    assert hits_per_request([[1, 2], [3, 2]], 5, past_miss=True) == [0, 1]
    with pytest.raises(ValueError, match=r"num_blocks must be ints in \[4,"):
        hits_per_request(trace, 3)


@settings(max_examples=60, deadline=None)
@given(tokens_st)
def test_chained_hashes_ceiling_and_monotone_curve(tokens_lists):
    requests = chains(tokens_lists)
    top = ceiling(requests)
    assert infinite_cache_hit_rate(requests) == top
    need = max(map(len, requests)) + 1
    sizes = list(range(need, need + 12)) + [need + sum(map(len, requests))]  # the last never evicts
    for policy in POLICIES:
        rates = list(prefix_hit_curve(requests, sizes, policy).values())
        assert rates == sorted(rates) and rates[-1] == top


@given(requests_st)
@settings(max_examples=30, deadline=None)
def test_ceiling_of_hashes_that_do_not_chain(requests):
    assert infinite_cache_hit_rate(requests) == ceiling(requests)


def test_bad_input():
    with pytest.raises(ValueError, match=r"pool_sizes must be ints in \[3,"):
        prefix_hit_curve([[1, 2]], [2])
    with pytest.raises(ValueError, match="pool_sizes"):
        prefix_hit_curve([[1, 2]], [True])
    with pytest.raises(ValueError, match="policy must be one of"):
        prefix_hit_curve([[1, 2]], [8], policy="lru")
    with pytest.raises(ValueError, match="lists a hash twice"):
        prefix_hit_curve([[1, 1]], [8])
    with pytest.raises(ValueError, match="no block"):
        infinite_cache_hit_rate([[], []])
    with pytest.raises(TypeError, match="unhashable"):
        infinite_cache_hit_rate([[[1]]])
    with pytest.raises(TypeError, match=r"requests_block_hashes\[1\]"):
        prefix_hit_curve([[1], 5], [8])
    with pytest.raises(TypeError, match="requests_block_hashes must be"):
        infinite_cache_hit_rate("abc")
    with pytest.raises(ValueError, match="no hash ids"):
        full_block_hashes([TraceRequest(0.0, 600, 1, None)])
    # 1,100 tokens in 512-token blocks: two full ones, the third id is a partial block's
    assert full_block_hashes([TraceRequest(0.0, 1_100, 1, (4, 5, 6))]) == [(4, 5)]
    assert prefix_hit_curve([[1, 2], [3], [1, 2]], np.array([4])) == {4: 2 / 5}  # numpy sizes are ints


def test_mooncake_excerpt():
    """The bundled 300 requests of Mooncake's conversation trace: 8,190 full 512-token blocks, every request
    opening with hash id 0; 299 of its blocks are hits in any pool (each request finds the block 0 the
    request before freed last, so most recently), and a pool of all 8,190 + 236 blocks keeps everything."""
    requests = full_block_hashes(load_trace(trace_path("mooncake-conv")))
    total, need = sum(map(len, requests)), max(map(len, requests)) + 1
    assert (len(requests), total, need) == (300, 8_190, 236)
    assert all(r[0] == 0 for r in requests)
    top = ceiling(requests)
    assert infinite_cache_hit_rate(requests) == top
    sizes = [need, 2_000, 4_000, 6_000, total + need]
    for policy in POLICIES:
        rates = list(prefix_hit_curve(requests, sizes, policy).values())
        assert rates == sorted(rates) and rates[0] >= 299 / total and rates[-1] == top
