"""Parametrised cards: draws are seeded (same seed, same numbers; other seeds, other numbers), realistic,
and every number a learner is asked for equals a figure recomputed here from first principles: the HF
config.json fields and datasheet peaks are typed in as literals, the formulas are the closed forms of
PROBLEMS.md, so no ringlab calculator is consulted."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ringlab.check.cards import card_ids, draw_params, is_parametrised, load_card, module
from ringlab.practice.session import card_rng

SEEDS = range(6)
PARAMETRISED = ["01", "04", "05", "06", "07", "08", "14", "16", "18", "19", "20", "21"]

# HF config.json: (layers, hidden, heads, kv_heads, head_dim, intermediate, vocab)
CONFIGS = {
    "llama-2-7b": (32, 4096, 32, 32, 128, 11008, 32000),
    "llama-2-13b": (40, 5120, 40, 40, 128, 13824, 32000),
    "llama-2-70b": (80, 8192, 64, 8, 128, 28672, 32000),
    "llama-3-8b": (32, 4096, 32, 8, 128, 14336, 128256),
    "llama-3-70b": (80, 8192, 64, 8, 128, 28672, 128256),
    "llama-3.1-405b": (126, 16384, 128, 8, 128, 53248, 128256),
    "qwen2-72b": (80, 8192, 64, 8, 128, 29568, 152064),
    "mixtral-8x7b": (32, 4096, 32, 8, 128, 14336, 32000),
    "falcon-40b": (60, 8192, 128, 8, 64, 32768, 65024),
}
# datasheets: dense bf16 TFLOP/s, HBM TB/s, memory GB (NVIDIA A100/H100/H200/B200/L40S, AMD MI300X)
GPUS = {
    "a100-sxm-80gb": (312, 2.039, 80), "a100-pcie-80gb": (312, 1.935, 80), "h100-sxm": (989, 3.35, 80),
    "h100-pcie": (756, 2.0, 80), "h200": (989, 4.8, 141), "b200": (2250, 8.0, 180), "mi300x": (1307.4, 5.3, 192),
    "l40s": (362.05, 0.864, 48),
}
NOMINAL = {"llama-2-7b": 7e9, "llama-3-8b": 8e9, "mistral-7b": 7.2e9, "llama-2-13b": 13e9, "llama-3-70b": 70e9}


def drawn(cid: str, seed: int) -> tuple[dict, object]:
    params = draw_params(cid, card_rng(seed, cid))
    return params, load_card(cid, params)


def test_the_parametrised_cards():
    assert [c for c in card_ids() if is_parametrised(c)] == PARAMETRISED


@pytest.mark.parametrize("cid", PARAMETRISED)
def test_same_seed_same_numbers_other_seeds_other_numbers(cid):
    first = [drawn(cid, s)[0] for s in range(10)]
    again = [drawn(cid, s)[0] for s in range(10)]
    assert first == again
    assert len({tuple(sorted(p.items())) for p in first}) >= 4, first
    questions = {drawn(cid, s)[1].question for s in range(10)}
    assert len(questions) >= 4


@pytest.mark.parametrize("cid", PARAMETRISED)
def test_draws_are_params_of_the_card_and_the_default_is_the_problem_set(cid):
    mod = module(cid)
    for s in SEEDS:
        assert set(drawn(cid, s)[0]) <= set(mod.PARAMS)
    assert load_card(cid).params == mod.PARAMS


@pytest.mark.parametrize("seed", SEEDS)
def test_01_ring_bytes(seed):
    p, card = drawn("01", seed)
    n, numel = p["n"], p["numel"]
    assert n in (4, 6, 8, 12, 16, 24, 32, 64, 128) and numel % n and 10**6 <= numel <= 10**8
    chunks = [len(c) for c in np.array_split(np.empty(numel, dtype=np.int8), n)]
    sent = [4 * (2 * numel - chunks[(r + 1) % n] - chunks[(r + 2) % n]) for r in range(n)]
    assert card.expected == {"max_rank": max(sent), "total": 2 * (n - 1) * numel * 4}
    assert sum(sent) == 2 * (n - 1) * numel * 4


@pytest.mark.parametrize("seed", SEEDS)
def test_04_ddp_and_full_shard_bytes(seed):
    p, card = drawn("04", seed)
    n, n_params = p["n"], p["n_params"]
    assert n % 8 == 0 and 16 <= n <= 256
    assert any(abs(n_params / v - 1) < 0.1 for v in NOMINAL.values()), n_params  # a real model's size
    m = 2 * n_params  # bf16 gradients / parameters
    assert card.expected["ddp_bytes"] == pytest.approx(2 * (n - 1) / n * m, rel=1e-9)
    assert card.expected["fsdp_bytes"] == pytest.approx(3 * (n - 1) / n * m, rel=1e-9)
    v = module("04").values(**p)  # what the prose claims holds for the drawn run
    assert 0.08 <= v["busbw_frac"] <= 0.13 and v["hsdp_ms"] > v["fsdp_ms"] and v["ddp_mem_gb"] > 80


@pytest.mark.parametrize("seed", SEEDS)
def test_05_kv_cache_bytes(seed):
    p, card = drawn("05", seed)
    layers, _, heads, kv, head_dim, _, _ = CONFIGS[p["model"]]
    assert kv < heads  # grouped-query: the card's "query heads instead of KV heads" trap exists
    per_token = 2 * layers * kv * head_dim * 2
    assert card.expected == {"per_token": per_token, "total": per_token * p["tokens"] * p["seqs"]}


@pytest.mark.parametrize("seed", SEEDS)
def test_06_roofline(seed):
    p, card = drawn("06", seed)
    tflops, tbs, _ = GPUS[p["hw"]]
    flops, nbytes = p["gflop"] * 1e9, p["gb"] * 1e9
    assert card.expected["ai"] == pytest.approx(flops / nbytes)
    assert card.expected["time_ms"] == pytest.approx(max(nbytes / (tbs * 1e12), flops / (tflops * 1e12)) * 1e3)
    bound = "memory" if flops / nbytes < tflops / tbs else "compute"
    assert f"kernel is {bound}-bound" in card.answer
    assert f"max({nbytes / (tbs * 1e12) * 1e3:.2f} ms, {flops / (tflops * 1e12) * 1e3:.2f} ms)" in card.answer


def _decode(model: str, gpu: str, ctx: int, sla_s: float) -> tuple[float, int]:
    """Step time at batch 1 and the SLA batch: weights streamed once per step (every matmul, the norms and
    the LM head; the input embedding is a lookup), plus each sequence's KV; memory 0.9 x datasheet (vLLM)."""
    layers, h, heads, kv, hd, inter, vocab = CONFIGS[model]
    per_layer = h * (heads * hd + 2 * kv * hd) + heads * hd * h + 3 * h * inter + 2 * h
    streamed = 2 * (layers * per_layer + h + h * vocab)
    resident = streamed + 2 * h * vocab
    kv_seq = 2 * layers * kv * hd * 2 * ctx
    tflops, tbs, mem = GPUS[gpu]
    bw = tbs * 1e12
    b_lat = int((sla_s * bw - streamed) // kv_seq)
    assert 2 * (streamed / 2) * b_lat / (tflops * 1e12) < sla_s  # memory-bound there: the closed form applies
    b_mem = int((0.9 * mem * 1e9 - resident) // kv_seq)
    return (streamed + kv_seq) / bw, min(b_lat, b_mem)


@pytest.mark.parametrize("seed", SEEDS)
def test_07_decode_step_and_sla_batch(seed):
    p, card = drawn("07", seed)
    t1, batch = _decode(p["model"], p["hw"], p["ctx"], p["sla_ms"] / 1e3)
    assert card.expected["t1_ms"] == pytest.approx(t1 * 1e3, rel=1e-6)
    assert card.expected["b_sla"] == batch and batch >= 4


def test_07_fixed_card_is_problem_set_p8():
    t1, batch = _decode("llama-3-8b", "h100-sxm", 4096, 0.020)
    assert round(t1 * 1e3, 2) == 4.64 and batch == 96


@pytest.mark.parametrize("seed", SEEDS)
def test_08_bubble(seed):
    p, card = drawn("08", seed)
    stages, micro = p["p"], p["m"]
    assert micro % stages == 0 and micro >= 2 * stages
    assert card.expected["ideal"] == pytest.approx(float(Fraction(stages - 1, micro)))
    assert card.expected["total"] == pytest.approx(float(Fraction(stages - 1, micro + stages - 1)))


@pytest.mark.parametrize("cid", PARAMETRISED)
@pytest.mark.parametrize("seed", SEEDS)
def test_drawn_cards_render_completely(cid, seed):
    _, card = drawn(cid, seed)
    text = card.text(reveal=True) + "".join(card.hints + card.rubric)
    assert "{" not in text and "}" not in text and "nan" not in text.lower().split()


def test_08_prose_claims_hold_for_every_drawable_shape():
    mod = module("08")
    for p in mod.STAGES:
        for k in mod.MICRO_PER_STAGE:
            v = mod.values(p, p * k)
            assert v["inter_peak_eq"] > v["f1b_peak"] and v["ideal_m4"] < v["ideal"], (p, k)


@pytest.mark.parametrize("seed", SEEDS)
def test_07_prose_claims_hold(seed):
    p, _ = drawn("07", seed)
    v = module("07").values(**p)
    assert v["c64_ms"] < v["t64_ms"] and v["b_mem"] >= 64 and v["t1_ms"] < v["sla_ms"]
    assert v["naive64_ms"] > v["t64_ms"]  # the circulating linear model overstates the step


@pytest.mark.parametrize("seed", SEEDS)
def test_14_paged_blocks(seed):
    p, card = drawn("14", seed)
    layers, _, _, kv, head_dim, _, _ = CONFIGS[p["model"]]
    bs, prompt, requests = p["block_size"], p["prompt"], p["requests"]
    assert prompt % bs and bs in (16, 32)  # a partial block exists, as the text says
    block = 2 * layers * kv * head_dim * 2 * bs  # fp16 K and V of every layer for bs tokens
    assert card.expected == {"block_bytes": block, "blocks": p["pool_gib"] * 2**30 // block,
                             "hits": (requests - 1) * (prompt // bs)}  # every request after the first reuses the full blocks


@pytest.mark.parametrize("seed", SEEDS)
def test_16_algbw_and_busbw(seed):
    p, card = drawn("16", seed)
    n = 8 * p["nodes"]  # DGX H100: 8 GPUs per node
    assert p["size"] in (2**30, 2**31, 2**32, 2**33)
    algbw = p["size"] / (p["time_us"] * 1e-6)
    busbw = algbw * 2 * (n - 1) / n  # nccl-tests PERFORMANCE.md, all_reduce
    assert card.expected["algbw_gbs"] == pytest.approx(algbw / 1e9)
    assert card.expected["busbw_gbs"] == pytest.approx(busbw / 1e9)
    assert 0.40 <= busbw / (8 * 50e9) <= 0.50  # 8 NDR rails of 50 GB/s: the text's "at half the NICs" stays <= 100 %
    v = card.values  # NCCL's own pick: latency + bytes / bandwidth, and no slower than Ring/Simple or Tree/LL
    assert p["probe"] in (2**16, 2**20, 2**24, 2**28)
    assert card.expected["nccl_time_us"] == pytest.approx(v["nccl_lat_us"] + p["probe"] / (1000 * v["nccl_bw_gbs"]),
                                                          rel=1e-5)
    assert card.expected["nccl_time_us"] <= min(v["ring_simple_text_us"], v["tree_ll_us"])


def _exposed_by_events(backward_s: list[float], allreduce_s: list[float]) -> float:
    """DDP's NCCL stream followed event by event: bucket i is ready when its backward ends, its all-reduce
    starts at the later of that and the previous all-reduce's end; exposed = last end - end of backward."""
    ready, stream_free = 0.0, 0.0
    for c, a in zip(backward_s, allreduce_s):
        ready += c
        stream_free = max(stream_free, ready) + a
    return stream_free - ready


@pytest.mark.parametrize("seed", SEEDS)
def test_18_exposed_communication(seed):
    p, card = drawn("18", seed)
    k, c, fast, slow = p["k"], p["backward_ms"], p["fast_ms"], p["slow_ms"]
    assert k in (4, 6, 8, 12, 16) and 0 < fast < c < slow <= 2 * c  # one case hides, one falls behind
    assert card.expected["exposed_fast"] == pytest.approx(fast)  # only the last bucket shows
    assert card.expected["exposed_slow"] == pytest.approx(slow + (k - 1) * (slow - c))  # backlog + last bucket
    for a in (fast, slow):
        assert _exposed_by_events([c] * k, [a] * k) == pytest.approx(a + (k - 1) * max(0.0, a - c))
    v = module("18").values(**p)  # the wrong answers the text names differ from the right one
    assert v["hidden_max_ms"] == 0 and v["wrong_cover_ms"] < v["exposed_slow"] < v["wrong_all_ms"]
