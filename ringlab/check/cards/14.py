"""Card 14 (Paged KV-cache block allocator (prefix sharing, copy-on-write)): the values its text uses, and
fresh models, pools and prompts."""

from __future__ import annotations

from ringlab.calc import kv_cache_bytes_per_token
from ringlab.check.cards import Ask, Slip
from ringlab.serving import BlockManager, block_bytes, pool_blocks

PARAMS = {"model": "llama-2-7b", "block_size": 16, "pool_gib": 60, "requests": 100, "prompt": 1_000}  # the fixed card's numbers
MODELS = ("llama-2-7b", "llama-3-8b", "llama-2-13b")  # full attention: every layer caches every token
BLOCK_SIZES = (16, 32)  # vLLM's usual sizes
POOLS_GIB = (20, 40, 60)  # what is left of an 80 GB GPU after the weights and activations
REQUESTS = (10, 50, 100, 200)

ASKS = (
    Ask("block_bytes", "bytes of one KV block", unit="B", show="B", rel_tol=0.001),
    Ask("blocks", "blocks in the pool", unit="1", rel_tol=0, noun="block"),
    Ask("hits", "blocks saved by sharing the system prompt", unit="1", rel_tol=0, noun="block"),
)
SLIPS = (
    Slip("block_bytes", "per_token", "that is one token's KV; a block holds {block_size} tokens"),
    Slip("blocks", "tokens", "that is the pool's tokens; a block holds {block_size} of them"),
    Slip("blocks", "wrong_gb_blocks", "the pool taken as {pool_gib} GB (10^9 B) instead of {pool_gib} GiB (2^30 B)"),
    Slip("hits", "wrong_partial_hits", "the partial block counted as shared; only the {full} full blocks are shared "
         "by hash"),
    Slip("hits", "wrong_first_hits", "the first request counted too; it stores the {full} full blocks, and only the "
         "requests after it find them"),
)


def values(model: str = "llama-2-7b", block_size: int = 16, pool_gib: int = 60, requests: int = 100,
           prompt: int = 1_000) -> dict:
    """Blocks of preset ``model`` in fp16 (``block_bytes``, ``pool_blocks``), and ``requests`` requests sharing a
    ``prompt``-token system prompt and a 4-way fork, run on ringlab's ``BlockManager``."""
    bs, n = block_size, 4
    blocks = pool_blocks(pool_gib * 2**30, model, bs, "fp16")
    shared = BlockManager(blocks, bs)
    for i in range(requests):
        shared.allocate(i, list(range(prompt)))
    fork = BlockManager(blocks, bs)
    fork.allocate(0, list(range(prompt)))
    for child in range(1, n):
        fork.fork(0, child)
    for sample in range(n):
        fork.append_token(sample, 50_000 + sample)
    together = BlockManager(blocks, bs)
    needed_together = together.blocks_needed([list(range(prompt))] * 2)
    per_block = block_bytes(model, bs, "fp16")
    return {
        "model": model, "block_size": bs, "pool_gib": pool_gib, "requests": requests, "prompt": prompt,
        "per_token": kv_cache_bytes_per_token(model, "fp16"), "block_bytes": per_block, "block_mib": per_block / 2**20,
        "pool_bytes": pool_gib * 2**30, "blocks": blocks, "tokens": blocks * bs,
        "full": prompt // bs, "full_tokens": prompt // bs * bs, "tail": prompt % bs,
        "shared_used": shared.num_used_blocks, "per_request": -(-prompt // bs),
        "unshared_used": requests * -(-prompt // bs), "hits": shared.prefix_cache_hits,
        "wrong_gb_blocks": pool_gib * 10**9 // per_block, "wrong_partial_hits": (requests - 1) * -(-prompt // bs),
        "wrong_first_hits": requests * (prompt // bs),
        "saved_gib": shared.prefix_cache_hits * per_block / 2**30,
        "n": n, "copies": fork.copies, "fork_used": fork.num_used_blocks,
        "watermark": int(0.01 * blocks), "half_block": bs // 2, "waste_mib": bs // 2 * per_block / bs / 2**20,
        "pair_shared": needed_together, "pair_dup": 2 * -(-prompt // bs),
    }


def draw(rng) -> dict:
    """A model, block size, pool and request count from the tuples above, and a system prompt of 300-3,000
    tokens that leaves a partial block (the text's partial-block and fork claims need one)."""
    bs = int(rng.choice(BLOCK_SIZES))
    prompt = int(rng.integers(300 // bs, 3_000 // bs)) * bs + int(rng.integers(1, bs))
    return {"model": str(rng.choice(MODELS)), "block_size": bs, "pool_gib": int(rng.choice(POOLS_GIB)),
            "requests": int(rng.choice(REQUESTS)), "prompt": prompt}
