"""Card 15 (Continuous-batching scheduler: admit, step, preempt; where it livelocks): the values its text uses."""

from __future__ import annotations

from ringlab.calc import get_hardware, get_model
from ringlab.serving import Request, SchedulerConfig, StepCost, simulate, swap_or_recompute


def values() -> dict:
    model, hw, pool, bs, a_prompt, b_prompt, out = "llama-2-7b", "h100-sxm", 64, 16, 512, 512, 200
    requests = [Request(0, 0.0, tuple(range(a_prompt)), out), Request(1, 1e-6, tuple(range(10_000, 10_000 + b_prompt)), out)]
    naive = simulate(requests, model, hw, pool, bs, SchedulerConfig.naive())
    fixed = simulate(requests, model, hw, pool, bs, SchedulerConfig(watermark=0.0))
    watermark = simulate(requests, model, hw, pool, bs, SchedulerConfig.naive(watermark=1 / pool))
    cost = StepCost(model, hw, 2048)
    # swap or recompute B, on this chip and on two whose host link and FLOP/s differ
    chips = {"h": hw, "a": "a100-sxm-80gb", "g": "gh200"}
    choice = {k: swap_or_recompute(model, chip, b_prompt, bs, cost=cost if chip == hw else None)
              for k, chip in chips.items()}  # the host link is each preset's (nominal, per direction)
    lo, hi = 1, 1 << 13  # in blocks: the context beyond which a swap beats recomputing on this chip
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if swap_or_recompute(model, hw, mid * bs, bs, cost=cost).cheaper == "swap" else (mid, hi)
    budget, long_prompt = 512, 5_000
    b_row, a_row = fixed.requests[1], fixed.requests[0]
    return {
        "model": model, "hw": hw, "pool": pool, "block_size": bs, "a_blocks": a_prompt // bs, "b_prompt": b_prompt,
        "b_blocks": b_prompt // bs, "cycle_start": naive.livelock[0], "cycle_end": naive.livelock[1],
        "period": naive.livelock[1] - naive.livelock[0], "wasted": int(naive.steps["wasted_tokens"].sum()),
        "b_queue_ms": b_row["queueing_s"] * 1e3, "a_out": a_row["output_tokens"], "tpot_ms": a_row["tpot_s"] * 1e3,
        "swap_bytes": choice["h"].bytes, "swap_gbs": choice["h"].link_bandwidth / 1e9,
        "swap_ms": choice["h"].swap_s * 1e3, "one_way_ms": choice["h"].swap_s / 2 * 1e3,
        "prefill_ms": choice["h"].recompute_s * 1e3, "h_cheaper": choice["h"].cheaper,
        **{f"{k}_{field}": value for k in "ag" for field, value in (
            ("hw", chips[k]), ("gbs", choice[k].link_bandwidth / 1e9), ("swap_ms", choice[k].swap_s * 1e3),
            ("prefill_ms", choice[k].recompute_s * 1e3), ("cheaper", choice[k].cheaper),
            ("tflops", get_hardware(chips[k]).tflops_bf16), ("link", get_hardware(chips[k]).host_link.split(",")[0]))},
        "h_link": get_hardware(hw).host_link.split(",")[0],
        "h_tflops": get_hardware(hw).tflops_bf16, "h_cross": hi * bs,
        "context": get_model(model).max_position_embeddings,
        "wm_finished": watermark.count("finished"), "long_prompt": long_prompt, "budget": budget,
        "chunks": -(-long_prompt // budget),
    }
