"""Card 11 (Gradient accumulation with DDP): the values its text uses."""

from __future__ import annotations

from ringlab.calc import GB, grad_comm_bytes


def values() -> dict:
    n_params, n, k = 7e9, 64, 8
    synced = grad_comm_bytes("ddp", n_params, n, grad_accum_steps=k, no_sync=True)
    every = grad_comm_bytes("ddp", n_params, n, grad_accum_steps=k, no_sync=False)
    f_sync = grad_comm_bytes("fsdp_full_shard", n_params, n, grad_accum_steps=k, no_sync=True)
    f_every = grad_comm_bytes("fsdp_full_shard", n_params, n, grad_accum_steps=k, no_sync=False)
    rs_one = f_every.breakdown[-1].bytes_sent // k
    return {
        "n_params": int(n_params), "n": n, "k": k, "k1": k - 1,
        "calls_plain": every.breakdown[0].count, "calls_nosync": synced.breakdown[0].count,
        "plain_gb": every.bytes_sent_per_rank / GB, "nosync_gb": synced.bytes_sent_per_rank / GB,
        "saved_gb": (every.bytes_sent_per_rank - synced.bytes_sent_per_rank) / GB,
        "fsdp_saved_gb": (f_every.bytes_sent_per_rank - f_sync.bytes_sent_per_rank) / GB,
        "rs_gb": rs_one / GB,
        "fsdp_grads_gb": f_sync.memory.grads / GB, "fsdp_grads_sharded_gb": f_every.memory.grads / GB,
    }
