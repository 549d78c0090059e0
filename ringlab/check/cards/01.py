"""Card 01 (Ring all-reduce, simulated and verified): the values its text uses, and fresh ring sizes."""

from __future__ import annotations

from ringlab.check.cards import Ask
from ringlab.collectives import ring_all_reduce_bytes

PARAMS = {"n": 8, "numel": 1_000_003}  # the fixed card: a float32 message that 8 does not divide
WORLD_SIZES = (4, 6, 8, 12, 16, 24, 32, 64, 128)  # one node up to 16 nodes of 8 GPUs; 6 and 12 are not powers of 2

ASKS = (
    Ask("max_rank", "bytes sent by the busiest rank", unit="B", show="B", rel_tol=0.001, world_size="n"),
    Ask("total", "bytes sent by all ranks together", unit="B", show="B", rel_tol=0.001, world_size="n"),
)


def values(n: int = 8, numel: int = 1_000_003) -> dict:
    """Ring all-reduce of ``numel`` float32 elements over ``n`` ranks (bytes from ``ring_all_reduce_bytes``)."""
    itemsize = 4
    per_rank = ring_all_reduce_bytes(n, numel, itemsize)
    return {
        "n": n, "numel": numel, "nbytes": numel * itemsize, "steps": 2 * (n - 1),
        "min_rank": int(per_rank.min()), "max_rank": int(per_rank.max()),
        "total": int(per_rank.sum()), "bound": 2 * (n - 1) / n * numel * itemsize,
    }


def draw(rng) -> dict:
    """A world size of :data:`WORLD_SIZES` and a gradient bucket of 1-100 M elements that it does not divide."""
    n = int(rng.choice(WORLD_SIZES))
    numel = int(rng.integers(10**6, 10**8)) // n * n + int(rng.integers(1, n))
    return {"n": n, "numel": numel}
