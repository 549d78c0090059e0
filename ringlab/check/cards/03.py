"""Card 03 (Ring reduce-scatter with torch.distributed): the values its text uses."""

from __future__ import annotations

import numpy as np

from ringlab.collectives import ring_reduce_scatter_bytes
from ringlab.sim import reduce_scatter


def values() -> dict:
    n = 4
    x = np.array([[10.0**r] * n for r in range(n)])  # rank r holds 10**r in every element
    right = reduce_scatter(x).outputs[:, 0]
    # The circulating version: every step forwards an ORIGINAL chunk (r - 1 - s) % N and the receiver
    # adds it only when the chunk index equals its own rank.
    wrong = x[np.arange(n), np.arange(n)].copy()
    for s in range(n - 1):
        for r in range(n):
            dst, chunk = (r + 1) % n, (r - 1 - s) % n
            if chunk == dst:
                wrong[dst] += x[r, chunk]
    numel = 2**20
    return {
        "n": n, "last": n - 1, "right": f"{right[0]:,.0f}", "wrong": ", ".join(f"{v:,.0f}" for v in wrong),
        "numel": numel, "rs_bytes": int(ring_reduce_scatter_bytes(n, numel, 4)[0]), "nbytes": numel * 4,
        "steps": n - 1,
    }
