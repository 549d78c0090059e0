"""Exact bounds of admission in the block manager and the scheduler, each checked on both sides of its edge.

Derived by counting blocks by hand (block size 16, a model whose layers are alike: ``ceil(L / 16)`` blocks for
``L`` tokens): the "never fits" flag leaves the watermark out of the pool, the worst case of a request keeps
``prompt + max_new_tokens - 1`` tokens (the last sampled token is never written to the cache), and ``n``
samples forked from a prompt whose last block is partial copy that block ``n - 1`` times (the last writer
keeps the original).
"""

from __future__ import annotations

import pytest

from ringlab.serving import Request, SchedulerConfig, simulate
from ringlab.serving.blocks import BlockManager, OutOfBlocksError


def _refusal(manager: BlockManager, tokens: int) -> OutOfBlocksError:
    with pytest.raises(OutOfBlocksError) as caught:
        manager.allocate("new", range(tokens))
    return caught.value


def test_never_fits_counts_the_watermark_out_of_the_pool():
    # 10 blocks of 4 tokens, 3 held back: at most 7 blocks can ever be admitted
    empty = BlockManager(10, 4, watermark_blocks=3, enable_prefix_caching=False)
    eight = _refusal(empty, 32)  # 8 blocks: more than 10 - 3 even with every block free
    assert (eight.needed, eight.available, eight.never) == (8, 7, True)
    assert "never fit" in str(eight)
    busy = BlockManager(10, 4, watermark_blocks=3, enable_prefix_caching=False)
    busy.allocate("held", range(4))  # one block in use: 9 free, 6 above the watermark
    seven = _refusal(busy, 28)  # 7 blocks: not now, but once "held" is freed
    assert (seven.needed, seven.available, seven.never) == (7, 6, False)
    assert "never fit" not in str(seven)
    busy.free("held")
    assert len(busy.allocate("new", range(28))) == 7


def _one(prompt: int, max_new: int, n: int = 1, rid: int = 0, arrival: float = 0.0) -> Request:
    return Request(rid, arrival, tuple(range(1000 * rid, 1000 * rid + prompt)), max_new, n)


@pytest.mark.parametrize("max_new, admitted", [(17, True), (18, False)])
def test_the_worst_case_keeps_prompt_plus_output_minus_one_tokens(max_new, admitted):
    """48 prompt tokens in a 4-block pool: 17 new tokens keep 48 + 16 = 64 = 4 blocks (fits), 18 keep 65 (5)."""
    trace = simulate([_one(48, max_new)], num_blocks=4, block_size=16, config=SchedulerConfig(watermark=0.0),
                     check_invariants=True)
    if admitted:
        assert trace.rejected == {} and trace.count("finished") == 1
        assert trace.requests[0]["output_tokens"] == max_new
    else:
        assert list(trace.rejected) == [0] and "worst case needs 5 blocks" in trace.rejected[0]


def test_a_fork_from_a_partial_block_reserves_n_minus_one_copies():
    """A (32 tokens, 2 blocks, + 1 decode block reserved) leaves 3 of 5 blocks free; B (20 tokens: 2 blocks, the
    second partial, 2 samples) needs 2 + 1 copy: admitted in the same step. Reserving n = 2 copies would not fit."""
    requests = [_one(32, 20, rid=0), _one(20, 2, n=2, rid=1)]
    trace = simulate(requests, num_blocks=5, block_size=16, config=SchedulerConfig(watermark=0.0),
                     check_invariants=True)
    admitted = [(e.step, e.request_id) for e in trace.events if e.kind == "admit"]
    assert admitted[:2] == [(0, 0), (0, 1)]
    assert trace.count("finished") == 2
    assert trace.requests[1]["output_tokens"] == 2 * 2


@pytest.mark.parametrize("n, admitted", [(2, True), (3, False)])
def test_more_samples_than_max_num_seqs_are_refused_on_arrival(n, admitted):
    """The n samples of a request decode together, one sequence each: more than max_num_seqs could never all run."""
    config = SchedulerConfig(watermark=0.0, max_num_seqs=2, max_steps=200)
    trace = simulate([_one(16, 4, n=n)], num_blocks=64, block_size=16, config=config, check_invariants=True)
    if admitted:
        assert trace.count("finished") == 1 and trace.requests[0]["output_tokens"] == 4 * n
    else:
        assert trace.rejected == {0: "its 3 samples exceed max_num_seqs=2"} and trace.num_steps == 0
