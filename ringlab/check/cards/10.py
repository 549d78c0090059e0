"""Card 10 (Mismatched collectives): the values its text uses."""

from __future__ import annotations

from ringlab.collectives import ring_all_gather_bytes, ring_all_reduce_bytes


def values() -> dict:
    n, fields = 4, 11  # fingerprint: op, dtype, ndim, up to 8 dims, as int64
    bucket = 25 * 2**20  # a 25 MiB gradient bucket, for scale
    return {
        "n": n, "fields": fields, "fp_bytes": fields * 8,
        "guard_bytes": int(ring_all_gather_bytes(n, n * fields, 8).max()), "guard_steps": n - 1,
        "bucket_mib": bucket // 2**20, "bucket_bytes": int(ring_all_reduce_bytes(n, bucket // 2, 2).max()),
        "bucket_steps": 2 * (n - 1),
    }
