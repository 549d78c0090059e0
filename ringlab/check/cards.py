"""Practice cards: one Markdown file per problem of the problem set, numbers filled in by code.

A card file ``cards/PNN.md`` has three sections, ``## Question``, ``## Answer`` and
``## Follow-ups``. Numbers are never typed into a card: the text holds ``str.format``
fields such as ``{ddp_bytes:,}`` and :data:`CARD_VALUES` computes them with ringlab's own
calculators, so a card cannot drift from the code. Literal braces are written ``{{`` and ``}}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

SECTIONS = ("Question", "Answer", "Follow-ups")


def _p1() -> dict:
    from ringlab.collectives import ring_all_reduce_bytes

    n, numel, itemsize = 8, 1_000_003, 4
    per_rank = ring_all_reduce_bytes(n, numel, itemsize)
    return {
        "n": n, "numel": numel, "nbytes": numel * itemsize, "steps": 2 * (n - 1),
        "min_rank": int(per_rank.min()), "max_rank": int(per_rank.max()),
        "total": int(per_rank.sum()), "bound": 2 * (n - 1) / n * numel * itemsize,
    }


def _p2() -> dict:
    from ringlab.calc import GB, GiB, bus_bandwidth, grad_comm_bytes
    from ringlab.collectives.cost import LINKS
    from ringlab.topology import get_cluster

    n_params, n = 7e9, 64
    ddp, fsdp, sgo = (grad_comm_bytes(s, n_params, n) for s in ("ddp", "fsdp_full_shard", "fsdp_shard_grad_op"))
    hsdp = grad_comm_bytes("hybrid_shard", n_params, n, gpus_per_node=8)
    m = ddp.message_bytes
    ndr = LINKS["ib-ndr"]  # the wrong picture: one 400 Gb/s port per GPU carrying all of its ring traffic
    cluster = get_cluster("dgx-h100", n // 8)
    seconds = 0.6  # an assumed measured time for the follow-up
    algbw = m / seconds
    healthy = cluster.node_network_bandwidth  # ring busbw at line rate across DGX H100 nodes: 8 rails x 50 GB/s
    return {
        "n_params": int(n_params), "n": n, "n1": n - 1, "m": m, "m_gb": m / GB, "m_gib": m / GiB,
        "ddp_bytes": ddp.bytes_sent_per_rank, "ddp_gb": ddp.bytes_sent_per_rank / GB,
        "ag_bytes": fsdp.breakdown[0].bytes_sent, "fsdp_bytes": fsdp.bytes_sent_per_rank,
        "fsdp_gb": fsdp.bytes_sent_per_rank / GB, "sgo_bytes": sgo.bytes_sent_per_rank,
        "ratio": fsdp.bytes_sent_per_rank / ddp.bytes_sent_per_rank,
        "ddp_mem_gb": ddp.memory.total / GB, "fsdp_mem_gb": fsdp.memory.total / GB,
        "sgo_mem_gb": sgo.memory.total / GB,
        "nodes": cluster.nodes, "nics": cluster.nics_per_node, "nic_gbps": cluster.nic_gbps,
        "link_gbs": ndr.bandwidth / GB, "node_gbs": healthy / GB, "nvlink_gbs": cluster.gpu_bandwidth / GB,
        "wrong_ddp_s": ddp.time(ndr), "wrong_fsdp_s": fsdp.time(ndr),
        "ddp_ms": ddp.time_on_cluster(cluster) * 1e3, "fsdp_ms": fsdp.time_on_cluster(cluster) * 1e3,
        "hsdp_ms": hsdp.time_on_cluster(cluster) * 1e3,
        "meas_s": seconds, "algbw_gbs": algbw / GB,
        "busbw_gbs": bus_bandwidth("all_reduce", m, seconds, n) / GB,
        "busbw_frac": bus_bandwidth("all_reduce", m, seconds, n) / healthy,
        "wrong_frac": bus_bandwidth("all_reduce", m, seconds, n) / ndr.bandwidth,
    }


def _p3() -> dict:
    from ringlab.calc import elementwise_cost, get_hardware, roofline

    flops, nbytes = 512e9, 8e9
    a100 = roofline(flops, nbytes, "a100-sxm-80gb")
    a100_40 = roofline(flops, nbytes, "a100-sxm-40gb")
    # The sparse-peak trap, shown on a kernel of 400 FLOP/B on an H100 SXM.
    dense = roofline(400 * nbytes, nbytes, "h100-sxm")
    sparse = roofline(400 * nbytes, nbytes, "h100-sxm", sparse=True)
    numel = 2**28
    unfused = roofline(*elementwise_cost(numel, 2, fused=False), "a100-sxm-80gb")
    fused = roofline(*elementwise_cost(numel, 2, fused=True), "a100-sxm-80gb")
    return {
        "gflop": flops / 1e9, "gb": nbytes / 1e9, "peak_t": a100.peak_flops / 1e12,
        "bw_tb": a100.bandwidth / 1e12, "ai": a100.intensity, "ridge": a100.ridge_point,
        "bound": a100.bound, "time_ms": a100.time_s * 1e3, "time_2tb_ms": nbytes / 2e12 * 1e3,
        "compute_ms": a100.compute_time_s * 1e3, "attain_t": a100.attainable_flops / 1e12,
        "frac": a100.fraction_of_peak,
        "bw40_tb": get_hardware("a100-sxm-40gb").hbm_bandwidth / 1e12, "time40_ms": a100_40.time_s * 1e3,
        "h_dense_t": dense.peak_flops / 1e12, "h_sparse_t": sparse.peak_flops / 1e12,
        "h_ridge": dense.ridge_point, "h_ridge_sparse": sparse.ridge_point,
        "h_bound": dense.bound, "h_bound_sparse": sparse.bound,
        "h_ms": dense.time_s * 1e3, "h_ms_sparse": sparse.time_s * 1e3, "h_tflop": dense.flops / 1e12,
        "numel": numel, "unfused_bytes": int(unfused.bytes_moved), "fused_bytes": int(fused.bytes_moved),
        "unfused_ai": unfused.intensity, "fused_ai": fused.intensity,
        "unfused_ms": unfused.time_s * 1e3, "fused_ms": fused.time_s * 1e3,
    }


def _p4() -> dict:
    gpus, interval_s = 8, 5
    ticks = 24 * 3600 // interval_s
    return {"gpus": gpus, "interval_s": interval_s, "ticks": ticks, "rows": gpus * ticks}


def _p5() -> dict:
    from ringlab.calc import GB, GiB, get_model, kv_cache_bytes, kv_cache_bytes_per_token, kv_heads_per_rank

    m = get_model("llama-2-70b")
    tokens, seqs = 4096, 32
    total = kv_cache_bytes(m, tokens, seqs, dtype="fp16")
    wrong = kv_cache_bytes(m.replace(num_key_value_heads=m.num_attention_heads), tokens, seqs, dtype="fp16")
    mqa = m.replace(num_key_value_heads=1)
    ds = get_model("deepseek-v3")
    mistral = get_model("mistral-7b")
    long_ctx = 32768
    return {
        "layers": m.num_hidden_layers, "heads": m.num_attention_heads, "kv_heads": m.num_key_value_heads,
        "head_dim": m.head_dim, "tokens": tokens, "seqs": seqs,
        "per_token": kv_cache_bytes_per_token(m, "fp16"),
        "per_token_kib": kv_cache_bytes_per_token(m, "fp16") / 2**10, "total": total, "total_gb": total / GB,
        "total_gib": total / GiB, "per_seq_gib": total / seqs / GiB,
        "wrong": wrong, "wrong_gb": wrong / GB, "wrong_ratio": wrong / total,
        "mqa_per_token": kv_cache_bytes_per_token(mqa, "fp16"),
        "mqa_gib": kv_cache_bytes(mqa, tokens, seqs, dtype="fp16") / GiB,
        "ds_layers": ds.num_hidden_layers, "ds_rank": ds.kv_lora_rank, "ds_rope": ds.qk_rope_head_dim,
        "ds_heads": ds.num_attention_heads, "ds_per_token": kv_cache_bytes_per_token(ds, "bf16"),
        "window": mistral.sliding_window, "long_ctx": long_ctx,
        "mistral_long_gib": kv_cache_bytes(mistral, long_ctx, dtype="fp16") / GiB,
        "mistral_unwindowed_gib": kv_cache_bytes_per_token(mistral, "fp16") * long_ctx / GiB,
        "tp8_heads": kv_heads_per_rank(m, 8), "tp8_gib": kv_cache_bytes(m, tokens, seqs, "fp16", tp=8) / GiB,
        "tp16_heads": kv_heads_per_rank(m, 16), "tp16_gib": kv_cache_bytes(m, tokens, seqs, "fp16", tp=16) / GiB,
        "odd_tokens": tokens + 1, "block": 16, "paged_tokens": -(-(tokens + 1) // 16) * 16,
        "paged": kv_cache_bytes(m, tokens + 1, seqs, "fp16", block_size=16),
        "unpaged": kv_cache_bytes(m, tokens + 1, seqs, "fp16"),
        **_p5_per_layer(long_ctx),
    }


def _p5_per_layer(long_ctx: int) -> dict:
    """Interleaved (Gemma-2-9B) and hybrid (Nemotron-H-56B) attention, from the per-layer model."""
    from ringlab.calc import GiB, get_model, kv_cache_bytes, kv_cache_bytes_per_token

    g, h = get_model("gemma-2-9b"), get_model("nemotron-h-56b")
    window = g.sliding_window
    per_token = kv_cache_bytes_per_token(g, "fp16")
    dense = h.replace(layer_types=None, mlp_types=None)
    return {
        "g_layers": g.num_hidden_layers, "g_window": window, "g_kv": g.num_key_value_heads, "g_head_dim": g.head_dim,
        "g_per_token": per_token, "g_global": g.count_layers("full"),
        "g_slope": kv_cache_bytes(g, window + 2, dtype="fp16") - kv_cache_bytes(g, window + 1, dtype="fp16"),
        "g_long_gib": kv_cache_bytes(g, long_ctx, dtype="fp16") / GiB,
        "g_uniform_gib": per_token * long_ctx / GiB, "g_capped_gib": per_token * window / GiB,
        "h_attn": h.count_layers("full"), "h_layers": h.num_hidden_layers,
        "h_per_token": kv_cache_bytes_per_token(h, "fp16"), "h_dense_per_token": kv_cache_bytes_per_token(dense, "fp16"),
        "h_frac": kv_cache_bytes_per_token(h, "fp16") / kv_cache_bytes_per_token(dense, "fp16"),
    }


def _p6() -> dict:
    from ringlab.collectives import ring_all_gather_bytes, ring_all_reduce_bytes

    n, fields = 4, 11  # fingerprint: op, dtype, ndim, up to 8 dims, as int64
    bucket = 25 * 2**20  # a 25 MiB gradient bucket, for scale
    return {
        "n": n, "fields": fields, "fp_bytes": fields * 8,
        "guard_bytes": int(ring_all_gather_bytes(n, n * fields, 8).max()), "guard_steps": n - 1,
        "bucket_mib": bucket // 2**20, "bucket_bytes": int(ring_all_reduce_bytes(n, bucket // 2, 2).max()),
        "bucket_steps": 2 * (n - 1),
    }


def _p7() -> dict:
    from ringlab.calc import GB, grad_comm_bytes

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


def _p8() -> dict:
    import numpy as np

    from ringlab.calc import GB, decode_step, get_hardware, max_batch_for_sla, naive_linear_decode_time

    model, hw, ctx, sla = "llama-3-8b", "h100-sxm", 4096, 0.020
    sweep = decode_step(model, hw, np.array([1, 64]), ctx)
    naive_t, naive_tps = naive_linear_decode_time(model, hw, np.array([1, 64]), ctx)
    best = max_batch_for_sla(model, hw, ctx, sla)
    bw, mem = get_hardware(hw).hbm_bandwidth, get_hardware(hw).memory
    tp_size, tp_sla = 8, 0.030
    tp = max_batch_for_sla("llama-2-70b", hw, ctx, tp_sla, tp=tp_size)
    big = decode_step("llama-2-70b", hw, 1, ctx)
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


def _p9() -> dict:
    import numpy as np

    from ringlab.collectives import ring_reduce_scatter_bytes
    from ringlab.sim import reduce_scatter

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


def _p10() -> dict:
    from fractions import Fraction

    from ringlab.calc import bubble_fraction, peak_in_flight, pipeline_schedule

    p, m, v = 8, 16, 2
    sim = pipeline_schedule(p, m, "1f1b")
    wall = Fraction(p - 1, m + p - 1)
    inter_peak = int(peak_in_flight(p, m, "interleaved-1f1b", v)[0])
    return {
        "p": p, "m": m, "v": v, "p1": p - 1,
        "ideal": bubble_fraction(p, m), "total": bubble_fraction(p, m, relative_to="total"),
        "wall_frac": f"{wall.numerator}/{wall.denominator}",
        "slots": sim.makespan, "busy": sim.makespan - int(sim.idle_slots()[0]), "idle": int(sim.idle_slots()[0]),
        "sim_ideal": sim.bubble_fraction(),
        "gpipe_peak": int(peak_in_flight(p, m, "gpipe")[0]), "f1b_peak": int(peak_in_flight(p, m, "1f1b")[0]),
        "inter": bubble_fraction(p, m, "interleaved-1f1b", v),
        "inter_peak": inter_peak, "inter_peak_eq": inter_peak / v,
        "zb": bubble_fraction(p, m, "zb-h1"), "m4": 4 * m, "ideal_m4": bubble_fraction(p, 4 * m),
    }


def _p11() -> dict:
    from ringlab.calc import layernorm_cost, roofline

    rows, cols, hw = 8192, 4096, "h100-sxm"
    flops, nbytes = layernorm_cost(rows, cols)
    fused = roofline(flops, nbytes, hw)
    # The eager torch sequence of notebook 12 (mean, x - mean, (xc * xc).mean, rsqrt, *, *, +) makes
    # 12 passes over the N x D tensor where the fused kernel makes 2: ten more, with the same small vectors.
    unfused = roofline(flops, nbytes + 10 * rows * cols * 2, hw)
    d, block = 5000, 1024
    pow2 = 1 << (d - 1).bit_length()
    loops = -(-d // block)
    rows_per_program = 4
    return {
        "rows": rows, "cols": cols, "hw": hw, "flops": flops, "bytes": nbytes, "ai": fused.intensity,
        "ridge": fused.ridge_point, "fused_us": fused.time_s * 1e6, "unfused_bytes": int(unfused.bytes_moved),
        "unfused_us": unfused.time_s * 1e6, "speedup": unfused.time_s / fused.time_s,
        "d": d, "pow2": pow2, "masked": pow2 - d, "masked_frac": (pow2 - d) / pow2,
        "block": block, "loops": loops, "tail": d - (loops - 1) * block, "tail_masked": loops * block - d,
        "rpp": rows_per_program, "wb_row": 2 * cols * 2, "wb_prog": 2 * cols * 2 // rows_per_program,
    }


def _p12() -> dict:
    from ringlab.collectives.cost import LINKS, alpha_beta_time, busiest_bytes, crossover, latency_terms

    n, m = 8, 2**30
    ratio = {f"{c}_{a}": busiest_bytes(c, a, n, m) / m for c, a in (
        ("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "ring"), ("broadcast", "binomial_tree"),
        ("broadcast", "scatter_allgather"), ("reduce", "binomial_tree"), ("all_to_all", "pairwise"),
        ("all_reduce", "double_binary_tree"))}
    nv, ib = LINKS["nvlink4"], LINKS["ib-ndr"]
    big_n, small, large = 64, 2**20, 2**30
    times = {f"{a}_{tag}": alpha_beta_time("all_reduce", a, big_n, size, ib) * 1e3
             for a in ("ring", "double_binary_tree") for tag, size in (("small", small), ("large", large))}
    return {
        "n": n, **ratio, "nv_dir": nv.bandwidth / 1e9, "nv_total": 2 * nv.bandwidth / 1e9,
        "ib_dir": ib.bandwidth / 1e9, "ib_gbit": ib.bandwidth * 8 / 1e9,
        "quoted_ratio": 2 * nv.bandwidth / ib.bandwidth, "fair_ratio": nv.bandwidth / ib.bandwidth,
        "ib_alpha_us": ib.alpha * 1e6, "big_n": big_n, "ring_steps": latency_terms("all_reduce", "ring", big_n),
        "small_mib": small / 2**20, "large_gib": large / 2**30, **times,
        "cross8_mb": crossover("all_reduce", ib, 8)["double_binary_tree"] / 1e6,
        "cross64_mb": crossover("all_reduce", ib, big_n)["double_binary_tree"] / 1e6, **_p12_cluster(),
    }


def _p12_cluster() -> dict:
    """1 GiB ring all-reduce on one and two DGX H100 nodes: NCCL-style channels vs one ring (one NIC)."""
    from ringlab.topology import build_on_cluster, cost_of, get_cluster

    one, two = get_cluster("dgx-h100", 1), get_cluster("dgx-h100", 2)
    t1 = cost_of(build_on_cluster("all_reduce", "ring_channels", one), one, 2**30)
    t2 = cost_of(build_on_cluster("all_reduce", "ring_channels", two), two, 2**30)
    flat = cost_of(build_on_cluster("all_reduce", "ring", two), two, 2**30)
    tp = cost_of(build_on_cluster("all_reduce", "ring_channels", two), two, 2**20)
    tp1 = cost_of(build_on_cluster("all_reduce", "ring_channels", one), one, 2**20)
    return {"nics": two.nics_per_node, "node_gbs": two.node_network_bandwidth / 1e9,
            "one_ms": t1.line_rate_seconds * 1e3, "two_ms": t2.line_rate_seconds * 1e3,
            "two_ratio": t2.line_rate_seconds / t1.line_rate_seconds, "two_step_ms": t2.seconds * 1e3,
            "flat_ms": flat.seconds * 1e3, "flat_ratio": flat.seconds / t1.seconds,
            "leave": t2.inter_node_fraction, "tp_us": tp.seconds * 1e6, "tp1_us": tp1.seconds * 1e6}


def _p13() -> dict:
    from ringlab.calc import kv_cache_bytes_per_token
    from ringlab.serving import BlockManager, block_bytes, pool_blocks

    model, bs, pool_gib, requests, prompt, n = "llama-2-7b", 16, 60, 100, 1_000, 4
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
        "saved_gib": shared.prefix_cache_hits * per_block / 2**30,
        "n": n, "copies": fork.copies, "fork_used": fork.num_used_blocks,
        "watermark": int(0.01 * blocks), "half_block": bs // 2, "waste_mib": bs // 2 * per_block / bs / 2**20,
        "pair_shared": needed_together, "pair_dup": 2 * -(-prompt // bs),
    }


def _p14() -> dict:
    from ringlab.serving import Request, SchedulerConfig, StepCost, simulate

    model, hw, pool, bs, a_prompt, b_prompt, out = "llama-2-7b", "h100-sxm", 64, 16, 512, 512, 200
    requests = [Request(0, 0.0, tuple(range(a_prompt)), out), Request(1, 1e-6, tuple(range(10_000, 10_000 + b_prompt)), out)]
    naive = simulate(requests, model, hw, pool, bs, SchedulerConfig.naive())
    fixed = simulate(requests, model, hw, pool, bs, SchedulerConfig(watermark=0.0))
    watermark = simulate(requests, model, hw, pool, bs, SchedulerConfig.naive(watermark=1 / pool))
    cost = StepCost(model, hw, 2048)
    swap_gbs = SchedulerConfig().swap_bandwidth / 1e9
    swap_bytes = b_prompt // bs * cost.kv_bytes_per_token * bs
    budget, long_prompt = 512, 5_000
    b_row, a_row = fixed.requests[1], fixed.requests[0]
    return {
        "model": model, "hw": hw, "pool": pool, "block_size": bs, "a_blocks": a_prompt // bs, "b_prompt": b_prompt,
        "b_blocks": b_prompt // bs, "cycle_start": naive.livelock[0], "cycle_end": naive.livelock[1],
        "period": naive.livelock[1] - naive.livelock[0], "wasted": int(naive.steps["wasted_tokens"].sum()),
        "b_queue_ms": b_row["queueing_s"] * 1e3, "a_out": a_row["output_tokens"], "tpot_ms": a_row["tpot_s"] * 1e3,
        "swap_bytes": swap_bytes, "swap_gbs": swap_gbs, "swap_ms": swap_bytes / (swap_gbs * 1e9) * 1e3,
        "prefill_ms": cost.step_time(b_prompt, b_prompt, b_prompt * (b_prompt + 1) // 2) * 1e3,
        "wm_finished": watermark.count("finished"), "long_prompt": long_prompt, "budget": budget,
        "chunks": -(-long_prompt // budget),
    }


def _p16() -> dict:
    from ringlab.collectives.cost import bus_factor
    from ringlab.topology import get_cluster

    nodes, size, time_us, tcp_gbps = 2, 8 * 2**30, 84_000, 100
    cluster = get_cluster("dgx-h100", nodes)  # the ring busbw line rate across nodes: all rails in use
    n, ceiling = cluster.world_size, cluster.node_network_bandwidth
    algbw = size / (time_us * 1e-6)
    busbw = algbw * bus_factor("all_reduce", n)
    half = cluster.nics_per_node // 2
    return {
        "nodes": nodes, "n": n, "nics": cluster.nics_per_node, "nic_gbps": cluster.nic_gbps, "size": size,
        "time_us": time_us, "time_s": time_us * 1e-6, "algbw_gbs": algbw / 1e9, "busbw_gbs": busbw / 1e9,
        "factor_ar": bus_factor("all_reduce", n), "factor_ag": bus_factor("all_gather", n),
        "factor_bc": bus_factor("broadcast", n), "nic_gbs": cluster.nic_bandwidth / 1e9,
        "ceiling_gbs": ceiling / 1e9, "efficiency": busbw / ceiling, "half_nics": half,
        "half_ceiling_gbs": half * cluster.nic_bandwidth / 1e9, "half_efficiency": busbw / (half * cluster.nic_bandwidth),
        "tcp_gbps": tcp_gbps, "tcp_gbs": tcp_gbps / 8, "tcp_ratio": ceiling / (tcp_gbps / 8 * 1e9),
    }


# card id -> function returning the values its text uses
CARD_VALUES: dict[str, Callable[[], dict]] = {
    "P1": _p1, "P2": _p2, "P3": _p3, "P4": _p4, "P5": _p5, "P6": _p6,
    "P7": _p7, "P8": _p8, "P9": _p9, "P10": _p10, "P11": _p11, "P12": _p12, "P13": _p13, "P14": _p14,
    "P16": _p16,
}


@dataclass(frozen=True)
class Card:
    """A rendered practice card."""

    id: str
    title: str
    question: str
    answer: str
    followups: str

    def text(self, reveal: bool = True) -> str:
        parts = [f"{self.id}. {self.title}", "", "QUESTION", self.question]
        if reveal:
            parts += ["", "ANSWER", self.answer, "", "FOLLOW-UPS", self.followups]
        return "\n".join(parts)


def card_ids() -> list[str]:
    """Ids of the shipped cards in problem order (``P1`` .. ``P12``)."""
    names = [p.name for p in resources.files("ringlab.check").joinpath("cards").iterdir() if p.name.endswith(".md")]
    return sorted((f"P{int(n[1:3])}" for n in names), key=lambda c: int(c[1:]))


def _file(card_id: str):
    m = re.fullmatch(r"[Pp]?(\d{1,2})", str(card_id).strip())
    ids = card_ids()
    if not m or f"P{int(m.group(1))}" not in ids:
        raise ValueError(f"unknown card {card_id!r}; cards: {', '.join(ids)}")
    return f"P{int(m.group(1))}", resources.files("ringlab.check").joinpath("cards", f"P{int(m.group(1)):02d}.md")


def load_card(card_id: str) -> Card:
    """Read and render card ``card_id`` (``"P2"``, ``"p2"`` or ``"2"``). Raises ValueError for unknown ids."""
    cid, path = _file(card_id)
    text = path.read_text(encoding="utf-8")
    title = text.splitlines()[0].lstrip("# ").strip()
    values = CARD_VALUES.get(cid, dict)()
    body = text.format_map(values)
    sections = {}
    for name in SECTIONS:
        m = re.search(rf"^## {name}\s*\n(.*?)(?=^## |\Z)", body, flags=re.S | re.M)
        if not m:
            raise ValueError(f"card {cid} has no '## {name}' section")
        sections[name] = m.group(1).strip()
    return Card(cid, title, sections["Question"], sections["Answer"], sections["Follow-ups"])
