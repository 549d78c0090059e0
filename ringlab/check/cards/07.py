"""Card 07 (Decode batch size under a latency SLA): the values its text uses, and fresh servers and SLAs."""

from __future__ import annotations

import numpy as np

from ringlab.calc import GB, decode_step, get_hardware, max_batch_for_sla, naive_linear_decode_time
from ringlab.check.cards import Ask, Slip

PARAMS = {"model": "llama-3-8b", "hw": "h100-sxm", "ctx": 4096, "sla_ms": 20}  # the fixed card's numbers
MODELS = ("llama-3-8b", "llama-2-7b", "llama-2-13b")  # dense, full-context KV (no window), multi-head or GQA
HARDWARE = ("h100-sxm", "h200", "a100-sxm-80gb", "mi300x", "b200")
CONTEXTS = (1024, 2048, 4096, 8192)
SLAS_MS = (15, 20, 25, 30, 40, 50)

ASKS = (
    Ask("t1_ms", "decode step time at batch 1", unit="s", show="ms", rel_tol=0.03),
    Ask("b_sla", "largest batch within the SLA that fits", unit="1", show="", rel_tol=0.03, noun="sequence"),
)
SLIPS = (
    Slip("b_sla", "b_lat", "that is the latency limit alone; the memory holds only {b_mem} sequences at full context"),
    Slip("b_sla", "b_mem", "that is the memory limit alone; the {sla_ms:.0f} ms SLA allows only {b_lat}"),
)


def values(model: str = "llama-3-8b", hw: str = "h100-sxm", ctx: int = 4096, sla_ms: int = 20) -> dict:
    """Decode of preset ``model`` in bf16 on one ``hw`` at ``ctx`` tokens of context, under ``sla_ms`` ms per step
    (``decode_step``, ``max_batch_for_sla``); the follow-up's Llama-2-70B over TP=8 stays fixed."""
    sla = sla_ms / 1e3
    sweep = decode_step(model, hw, np.array([1, 64]), ctx)
    naive_t, naive_tps = naive_linear_decode_time(model, hw, np.array([1, 64]), ctx)
    best = max_batch_for_sla(model, hw, ctx, sla)
    bw, mem = get_hardware(hw).hbm_bandwidth, get_hardware(hw).memory
    tp_size, tp_sla = 8, 0.030
    tp = max_batch_for_sla("llama-2-70b", "h100-sxm", ctx, tp_sla, tp=tp_size)  # the follow-up: 70B on H100s
    big = decode_step("llama-2-70b", "h100-sxm", 1, ctx)
    return {
        "model": model, "hw": hw, "ctx": ctx, "sla_ms": sla * 1e3, "bw_tb": bw / 1e12,
        "w_gb": sweep.weight_bytes / GB,
        "streamed_gb": float(sweep.bytes_per_step[0] - sweep.kv_bytes_per_sequence) / GB,  # B = 1: weights only
        "kv_seq_gb": sweep.kv_bytes_per_sequence / GB,
        "t1_ms": sweep.step_time_s[0] * 1e3, "t64_ms": sweep.step_time_s[1] * 1e3,
        "tps1": sweep.tokens_per_s[0], "tps64": sweep.tokens_per_s[1],
        "c64_ms": sweep.compute_time_s[1] * 1e3, "slope_ms": sweep.kv_bytes_per_sequence / bw * 1e3,
        "naive64_ms": naive_t[1] * 1e3, "naive_tps": naive_tps[1], "kv_cap_tps": bw / sweep.kv_bytes_per_sequence,
        "b_sla": best.batch_size, "b_lat": best.latency_limit, "b_mem": best.memory_limit,
        "bound_by": best.bound_by, "t_sla_ms": best.step.step_time_s * 1e3, "tps_sla": best.step.tokens_per_s,
        "cap_gb": best.step.memory_capacity / GB, "mem_gb": mem / GB,
        "mem_frac": best.step.memory_capacity / mem, "mfu_sla": best.step.mfu,
        "big_w_gb": big.weight_bytes / GB, "tp": tp_size, "tp_sla_ms": tp_sla * 1e3,
        "tp_b": tp.batch_size, "tp_bound": tp.bound_by,
        "tp_w_gb": tp.step.weight_bytes / GB, "tp_comm_ms": tp.step.comm_time_s * 1e3,
        "tp_t_ms": tp.step.step_time_s * 1e3, "tp_tps": tp.step.tokens_per_s,
    }


def draw(rng) -> dict:
    """A model, GPU, context and SLA from the tuples above, redrawn until the SLA admits a batch of at
    least 4 and batch 64 is still memory-bound (what the text asserts)."""
    while True:
        params = {"model": str(rng.choice(MODELS)), "hw": str(rng.choice(HARDWARE)), "ctx": int(rng.choice(CONTEXTS)),
                  "sla_ms": int(rng.choice(SLAS_MS))}
        if max_batch_for_sla(params["model"], params["hw"], params["ctx"], params["sla_ms"] / 1e3).batch_size < 4:
            continue
        v = values(**params)
        if v["b_sla"] >= 4 and v["c64_ms"] < v["t64_ms"] and v["b_mem"] >= 64:
            return params
