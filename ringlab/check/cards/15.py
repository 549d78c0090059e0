"""Card 15 (Continuous-batching scheduler: admit, step, preempt; where it livelocks): the values its text uses."""

from __future__ import annotations


def values() -> dict:
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
