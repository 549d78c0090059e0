"""Card 21 (Serving real traffic: the prefix-hit rate of a Mooncake excerpt): the values its text uses, and
fresh excerpt lengths and pools."""

from __future__ import annotations

import math

from ringlab.check.cards import Ask, Slip
from ringlab.serving.prefix_hits import full_block_hashes, infinite_cache_hit_rate, prefix_hit_curve
from ringlab.serving.traces import MOONCAKE_HASH_BLOCK, load_trace, trace_path

PARAMS = {"requests": 300, "blocks": 3_000}  # the whole bundled excerpt, a pool that evicts
# The excerpt's reuse beyond its shared first block starts after ~150 requests; pools from 1,000 blocks (only that
# block survives) to 6,000 (near the ceiling), all above the longest request's 235 full blocks.
REQUESTS = (200, 250, 280, 300)
BLOCKS = (1_000, 2_000, 3_000, 4_000, 5_000, 6_000)

ASKS = (
    Ask("rate", "prefix-hit rate of vLLM v1's pool", unit="1", show="%", rel_tol=0.005),
    Ask("ceiling", "hit rate of a cache that never evicts", unit="1", show="%", rel_tol=0.005),
)
SLIPS = (
    Slip("rate", "wrong_ceiling", "that is the ceiling: a pool of {blocks:,} blocks evicts, and the blocks it evicts miss"),
    Slip("rate", "wrong_tokens", "that divides the hit tokens by all {tokens:,} prompt tokens, partial blocks "
         "included; the rate counts full blocks: hits / {listed:,}"),
    Slip("ceiling", "wrong_raw_ceiling", "every hash id counted, the last partial block's too; vLLM caches full "
         "blocks only, input_tokens // {hash_block} of them"),
)


def values(requests: int = 300, blocks: int = 3_000) -> dict:
    """The first ``requests`` requests of the bundled Mooncake conversation excerpt, their full 512-token blocks
    (``full_block_hashes``) replayed through vLLM v1's pool of ``blocks`` blocks (``prefix_hit_curve``), the
    ceiling (``infinite_cache_hit_rate``), and the slips' values."""
    records = load_trace(trace_path("mooncake-conv"))[:requests]
    full = full_block_hashes(records)
    listed = sum(map(len, full))
    rate = prefix_hit_curve(full, [blocks], policy="vllm-v1")[blocks]
    ceiling = infinite_cache_hit_rate(full)
    first = full[0][0]
    tokens = sum(r.input_tokens for r in records)
    return {
        "requests": requests, "blocks": blocks, "hash_block": MOONCAKE_HASH_BLOCK, "listed": listed,
        "tokens": tokens, "longest": max(map(len, full)),
        "rate": rate, "hits": round(rate * listed), "ceiling": ceiling, "ceiling_hits": round(ceiling * listed),
        "later": requests - 1, "shared_first": sum(ids[:1] == (first,) for ids in full[1:]),
        "wrong_ceiling": None if math.isclose(rate, ceiling) else ceiling,  # a pool this large evicts no reuse
        "wrong_tokens": round(rate * listed) * MOONCAKE_HASH_BLOCK / tokens,
        "wrong_raw_ceiling": infinite_cache_hit_rate([r.hash_ids for r in records]),
        "pool_tokens": blocks * MOONCAKE_HASH_BLOCK,
    }


def draw(rng) -> dict:
    """An excerpt length of :data:`REQUESTS` and a pool of :data:`BLOCKS`."""
    return {"requests": int(rng.choice(REQUESTS)), "blocks": int(rng.choice(BLOCKS))}
