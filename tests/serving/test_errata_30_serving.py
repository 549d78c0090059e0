"""Issue 30, items 4 and 11: the host link a swap crosses comes from the hardware preset (PCIe Gen4 / Gen5,
GH200's NVLink-C2C), and the serving block budget counts windowed layers and Mamba state as ``calc kv`` does.

Expected values are worked out here from the published figures and the config.json fields, not read back
from the code under test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ringlab.calc import get_model
from ringlab.calc.hardware import HARDWARE, get_hardware
from ringlab.serving import Request, SchedulerConfig, StepCost, simulate

HF = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
LLAMA_7B_TOKEN_BYTES = 2 * 32 * 4096 * 2  # K and V, 32 layers, 4096 wide, bf16: 524,288 B


# ---- item 4: the host link -----------------------------------------------------------------------

# per direction, nominal: PCIe x16 is quoted as 32 / 64 / 128 GB/s both ways for Gen3 / Gen4 / Gen5;
# NVLink-C2C as 900 GB/s both ways (GH200 datasheet)
HOST_LINKS = {"a100-sxm-80gb": 32e9, "a100-pcie-40gb": 32e9, "h100-sxm": 64e9, "h100-pcie": 64e9, "h200": 64e9,
              "b200": 64e9, "mi300x": 64e9, "gh200": 450e9, "l4": 32e9, "t4": 16e9}


@pytest.mark.parametrize("name", sorted(HOST_LINKS))
def test_gpu_presets_carry_their_host_link(name):
    hw = HARDWARE[name]
    assert hw.host_link_bandwidth == HOST_LINKS[name]
    assert ("C2C" if name == "gh200" else "PCIe Gen") in hw.host_link


def test_every_gpu_preset_has_a_host_link_and_tpus_none():
    for hw in HARDWARE.values():
        if hw.name.startswith("tpu"):
            assert hw.host_link_bandwidth is None
        else:
            assert hw.host_link and hw.host_link_bandwidth > 0, hw.name


def _swap_run(hardware, **config):
    """Two 512-token requests whose growth forces a swap preemption in a 64-block pool."""
    requests = [Request(0, 0.0, tuple(range(500)), 200), Request(1, 1e-6, tuple(range(10_000, 10_500)), 200)]
    return simulate(requests, "llama-2-7b", hardware, 64, 16,
                    SchedulerConfig(preemption="swap", watermark=0.0, max_num_batched_tokens=1024, **config),
                    check_invariants=True)


@pytest.mark.parametrize("hardware", ["a100-sxm-80gb", "h100-sxm", "gh200"])
def test_swap_time_uses_the_presets_host_link(hardware):
    """Swapping charges the preset's link; an explicit swap_bandwidth overrides it. On the old constant
    25 GB/s every chip was charged the same transfer time."""
    default = _swap_run(hardware)
    assert default.preemptions["swap"] > 0
    explicit = _swap_run(hardware, swap_bandwidth=HOST_LINKS[hardware])
    assert list(default.steps["end_s"]) == list(explicit.steps["end_s"])
    slow = _swap_run(hardware, swap_bandwidth=25e9)
    # the same schedule; the difference is the transfers: blocks out + blocks in, at each rate
    moved = sum(int(e.detail.split()[1]) for e in slow.events if e.kind == "preempt") + \
        sum(int(e.detail.split()[0]) for e in slow.events if e.kind == "swap in")
    block = 16 * LLAMA_7B_TOKEN_BYTES
    extra = moved * block * (1 / 25e9 - 1 / HOST_LINKS[hardware])
    assert slow.steps["end_s"][-1] - default.steps["end_s"][-1] == pytest.approx(extra, rel=1e-9)


def test_a_chip_without_a_host_link_needs_an_explicit_swap_bandwidth():
    with pytest.raises(ValueError, match="swap_bandwidth"):
        _swap_run("tpu-v5p")
    assert _swap_run("tpu-v5p", swap_bandwidth=25e9).count("finished") == 2


def test_swap_bandwidth_is_checked():
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="swap_bandwidth"):
            SchedulerConfig(swap_bandwidth=bad)


def _prefill_s(hardware, tokens):
    """Prefill of ``tokens`` tokens of Llama-2-7B in bf16, compute-bound: 2 FLOPs per weight per token
    (6,738,415,616 weights) plus QK^T and PV over the causal triangle, 4 x 32 layers x 4096 FLOPs per
    attended pair, at the dense bf16 peak; memory (weights once) is below it for 512 tokens."""
    hw = get_hardware(hardware)
    flops = 2 * 6_738_415_616 * tokens + 4 * 32 * 4096 * tokens * (tokens + 1) // 2
    memory = (6_738_415_616 * 2 + tokens * LLAMA_7B_TOKEN_BYTES) / hw.hbm_bandwidth
    return max(flops / (hw.tflops_bf16 * 1e12), memory)


@pytest.mark.parametrize("hardware, link, cheaper", [
    ("a100-sxm-80gb", 32e9, "swap"),  # 16.8 ms out and in against 21.9 ms of prefill
    ("h100-sxm", 64e9, "recompute"),  # 8.4 ms against 6.9 ms
    ("h100-sxm", 25e9, "recompute"),  # the old constant: 21.5 ms
    ("gh200", 450e9, "swap"),  # 1.2 ms
])
def test_swap_or_recompute_follows_each_chips_numbers(hardware, link, cheaper):
    from ringlab.serving import swap_or_recompute

    override = None if link == HOST_LINKS[hardware] else link
    r = swap_or_recompute("llama-2-7b", hardware, 512, block_size=16, swap_bandwidth=override)
    swap_s = 2 * 512 * LLAMA_7B_TOKEN_BYTES / link  # out now, back in later: the link crossed twice
    assert r.bytes == 512 * LLAMA_7B_TOKEN_BYTES and r.link_bandwidth == link
    assert r.swap_s == pytest.approx(swap_s, rel=1e-12)
    assert r.recompute_s == pytest.approx(_prefill_s(hardware, 512), rel=0.02)
    assert r.cheaper == cheaper == ("swap" if swap_s < _prefill_s(hardware, 512) else "recompute")


def test_card_15_takes_the_link_from_the_preset():
    from ringlab.check.cards import load_card

    v = load_card("15").values
    assert v["swap_gbs"] == 64  # h100-sxm, PCIe Gen5 x16 each way
    assert v["swap_ms"] == pytest.approx(2 * 512 * LLAMA_7B_TOKEN_BYTES / 64e9 * 1e3)
    text = load_card("15").text(reveal=True)
    assert "25 GB/s" not in text


# ---- item 11: windowed layers and Mamba state, as calc kv counts them ------------------------------

def _direct_bytes(name, tokens, block_size=16, width=2):
    """Bytes one sequence holds, counted here from the config.json fields: per attention layer, K and V of
    its KV heads for the tokens it keeps (a sliding layer at most ``sliding_window``), in whole blocks;
    per Mamba-2 layer a conv state of (conv_kernel - 1) x (d_inner + 2 n_groups d_state) and an SSM state of
    heads x head_dim x d_state, in the cache dtype (vLLM's MambaStateShapeCalculator)."""
    cfg = json.loads((HF / f"{name}.json").read_text())
    cfg = cfg.get("text_config", cfg)
    n = cfg["num_hidden_layers"]
    if name.startswith("nemotron-h"):
        pattern = cfg["hybrid_override_pattern"]
        kinds = ["full" if c == "*" else "mamba" if c == "M" else "none" for c in pattern]
        head_dim = cfg["attention_head_dim"]
    else:
        # transformers' defaults: Gemma-2 alternates sliding / full from layer 0; Gemma-3 has a full layer
        # every 6th; Mistral v0.1 windows every layer
        every = {"gemma-2-9b-it": 2, "gemma-3-27b": 6}.get(name)
        kinds = ["sliding" if every is None or (i + 1) % every else "full" for i in range(n)]
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]

    def blocks(t):
        return -(-t // block_size) * block_size

    total = 0
    for kind in kinds:
        per_token = 2 * cfg["num_key_value_heads"] * head_dim * width
        if kind == "full":
            total += blocks(tokens) * per_token
        elif kind == "sliding":
            total += blocks(min(tokens, cfg["sliding_window"])) * per_token
        elif kind == "mamba":
            d_inner = cfg["mamba_num_heads"] * cfg["mamba_head_dim"]
            conv = (cfg["conv_kernel"] - 1) * (d_inner + 2 * cfg["n_groups"] * cfg["ssm_state_size"])
            total += (conv + cfg["mamba_num_heads"] * cfg["mamba_head_dim"] * cfg["ssm_state_size"]) * width
    return total


@pytest.mark.parametrize("name", ["gemma-2-9b-it", "gemma-3-27b", "mistral-7b", "nemotron-h-56b"])
@pytest.mark.parametrize("tokens", [1, 100, 1024, 1025, 4096, 4097, 20_000])
def test_sequence_bytes_count_windows_and_state_from_real_configs(name, tokens):
    from ringlab.serving import sequence_kv_bytes

    model = get_model(str(HF / f"{name}.json"))
    assert sequence_kv_bytes(model, tokens, 16, "bf16") == _direct_bytes(name, tokens)


def test_windowed_and_state_sequences_cost_less_and_more_than_full_attention_would():
    """Past its 4,096-token window Mistral v0.1 holds no more; Nemotron-H pays its state even at one token."""
    from ringlab.calc.kvcache import kv_cache_bytes_per_token, state_bytes_per_sequence
    from ringlab.serving import sequence_kv_bytes

    mistral = get_model(str(HF / "mistral-7b.json"))
    assert sequence_kv_bytes(mistral, 20_000, 16, "bf16") == sequence_kv_bytes(mistral, 4096, 16, "bf16") \
        == 4096 * kv_cache_bytes_per_token(mistral, "bf16") < 20_000 * kv_cache_bytes_per_token(mistral, "bf16")
    nemotron = get_model(str(HF / "nemotron-h-56b.json"))
    assert state_bytes_per_sequence(nemotron, "bf16") == 54 * (3 * 20_480 + 256 * 64 * 256) * 2
    assert sequence_kv_bytes(nemotron, 1, 16, "bf16") == 16 * kv_cache_bytes_per_token(nemotron, "bf16") + \
        54 * (3 * 20_480 + 256 * 64 * 256) * 2
    with pytest.raises(ValueError, match="tp=3"):
        state_bytes_per_sequence(nemotron, "bf16", tp=3)


# ---- item 11 in the scheduler: the pool, admission, growth, preemption and step time ------------------

GEMMA2_LAYER_TOKEN = 2 * 8 * 256 * 2  # K and V, 8 KV heads of 256, bf16: 8,192 B per layer and token
GEMMA2_BLOCK = 16 * 21 * GEMMA2_LAYER_TOKEN  # a pool block: 16 tokens of the 21 global layers (vLLM's page)
MISTRAL_TOKEN = 32 * 2 * 8 * 128 * 2  # 32 sliding layers, 8 KV heads of 128, bf16: 131,072 B
NEMOTRON_BLOCK = 16 * 10 * 2 * 8 * 128 * 2  # 10 attention layers: 655,360 B
NEMOTRON_STATE = 54 * (3 * 20_480 + 256 * 64 * 256) * 2  # 54 Mamba-2 layers: 459,620,352 B


def _ceil(a, b):
    return -(-a // b)


def _long_requests(count, prompt, new, base=0):
    return [Request(base + i, i * 1e-6, tuple(range(1_000_000 * (i + 1), 1_000_000 * (i + 1) + prompt)), new)
            for i in range(count)]


def test_gemma2_pool_blocks_are_pages_of_its_global_layers():
    from ringlab.serving import block_bytes, pool_blocks

    assert block_bytes("gemma-2-9b", 16, "bf16") == GEMMA2_BLOCK == 2_752_512
    assert pool_blocks(10_000 * GEMMA2_BLOCK, "gemma-2-9b", 16, "bf16") == 10_000
    assert block_bytes("llama-2-7b", 16, "bf16") == 16 * LLAMA_7B_TOKEN_BYTES  # full attention: unchanged
    assert block_bytes("mistral-7b", 16, "bf16") == 16 * MISTRAL_TOKEN  # every layer windowed: all of them


def test_gemma2_admits_as_many_long_sequences_as_a_direct_count_allows():
    """20,000-token prompts: 1,250 blocks of the global layers plus 256 for the 4,096-token window of the
    sliding ones (the same page size), 1,506 blocks each; a pool of 27.5 GB (10,000 such blocks) runs 6 at
    once. Counting the sliding layers as full would give 2 x 1,250 blocks each, and 4 at once. (Gemma 2's context
    is 8,192 tokens: max_model_len is raised past it on purpose, to make the window's saving large.)"""
    from ringlab.serving import pool_blocks

    pool_bytes = 10_000 * GEMMA2_BLOCK
    per_seq = _ceil(20_000, 16) + _ceil(4096, 16)
    expected = pool_bytes // (per_seq * GEMMA2_BLOCK)
    full_attention = pool_bytes // (2 * _ceil(20_000, 16) * GEMMA2_BLOCK)
    assert (expected, full_attention) == (6, 4)
    trace = simulate(_long_requests(9, 20_000, 150), "gemma-2-9b", "h100-sxm",
                     pool_blocks(pool_bytes, "gemma-2-9b", 16, "bf16"), 16,
                     SchedulerConfig(watermark=0.0, chunked_prefill=True, max_model_len=20_150),
                     check_invariants=True)
    assert trace.count("finished") == 9 and trace.preemptions["recompute"] == 0
    assert int(trace.steps["running"].max()) == expected


def test_mistral_sequences_release_blocks_past_the_window():
    """Mistral v0.1 windows every layer at 4,096 tokens: a sequence growing to 5,000 tokens holds 256 blocks
    at most, so four fit in 1,028 blocks without a preemption (full attention would need 4 x 313)."""
    trace = simulate(_long_requests(4, 500, 4500), "mistral-7b", "h100-sxm", 4 * 256 + 4, 16,
                     SchedulerConfig(watermark=0.0), check_invariants=True)
    assert trace.count("finished") == 4
    assert trace.preemptions == {"recompute": 0, "swap": 0}
    assert int(trace.steps["free_blocks"].min()) == 4  # all four at their 256-block peak at once


def test_nemotron_h_holds_its_mamba_state_per_running_sequence():
    """Each running sequence holds ceil(459,620,352 / 655,360) = 702 blocks of Mamba state next to its 7
    attention blocks for 100 tokens: a 2,000-block pool runs 2 at once (not 5), and a 700-block pool none."""
    state_blocks = _ceil(NEMOTRON_STATE, NEMOTRON_BLOCK)
    assert state_blocks == 702
    per_seq = _ceil(100 + 49, 16) + state_blocks
    expected = 2000 // per_seq
    trace = simulate(_long_requests(5, 100, 50), "nemotron-h-56b", "h100-sxm", 2000, 16,
                     SchedulerConfig(watermark=0.0), check_invariants=True)
    assert trace.count("finished") == 5 and int(trace.steps["running"].max()) == expected == 2
    held = 2000 - int(trace.steps["free_blocks"].min())
    assert held <= expected * per_seq and held >= expected * (_ceil(100, 16) + state_blocks)
    small = simulate(_long_requests(1, 100, 50), "nemotron-h-56b", "h100-sxm", 700, 16, SchedulerConfig())
    assert small.count("rejected") == 1 and "blocks" in next(iter(small.rejected.values()))


def test_a_swapped_nemotron_sequence_moves_its_state_too():
    """Two sequences outgrow a 1,500-block pool; the swapped one moves its attention blocks and its 702 state
    blocks, and the swap time charges them all."""
    trace = simulate(_long_requests(2, 100, 1500), "nemotron-h-56b", "h100-sxm", 1500, 16,
                     SchedulerConfig(preemption="swap", watermark=0.0, swap_bandwidth=64e9), check_invariants=True)
    assert trace.count("finished") == 2 and trace.preemptions["swap"] >= 1
    for e in trace.events:
        if e.kind == "preempt":
            blocks = int(e.detail.split()[1])
            assert blocks - 702 >= _ceil(100, 16) and (blocks - 702) * 16 <= 100 + 1500


def test_decode_reads_at_most_the_window_of_a_sliding_layer():
    """calc decode's rule in the serving step: a sliding layer reads min(context, window) tokens."""
    mistral = StepCost("mistral-7b", "h100-sxm", 64)
    assert mistral.kv_bytes_read(8192) == 4096 * MISTRAL_TOKEN < 8192 * mistral.kv_bytes_per_token
    assert mistral.kv_bytes_read(100) == 100 * MISTRAL_TOKEN
    gemma = StepCost("gemma-2-9b", "h100-sxm", 64)
    assert gemma.kv_bytes_read(10_000) == 21 * GEMMA2_LAYER_TOKEN * (10_000 + 4096)
    llama = StepCost("llama-2-7b", "h100-sxm", 64)
    assert llama.kv_bytes_read(5000) == 5000 * LLAMA_7B_TOKEN_BYTES


def test_a_mistral_decode_step_is_charged_the_windowed_bytes():
    """One sequence decoding at 8,001 tokens: the step is memory-bound and reads 4,096 tokens of KV."""
    cost = StepCost("mistral-7b", "h100-sxm", 8192)
    trace = simulate([Request(0, 0.0, tuple(range(8000)), 3)], "mistral-7b", "h100-sxm", 1000, 16,
                     SchedulerConfig(max_num_batched_tokens=8192))
    decode = [i for i in range(trace.num_steps) if trace.steps["decode_tokens"][i] == 1]
    assert decode
    i = decode[0]
    took = trace.steps["end_s"][i] - trace.steps["start_s"][i]
    bare = cost.step_time(1, 0, 8001)  # weights only, memory-bound
    assert took == pytest.approx(bare + 4096 * MISTRAL_TOKEN / cost.hardware.hbm_bandwidth, rel=1e-9)


def test_serve_sim_sizes_a_gemma2_pool_in_pages_of_its_global_layers(capsys):
    """The default pool is the KV memory next to the weights: for Gemma-2 that many bytes hold twice as
    many blocks of its 21 global layers as blocks of all 42."""
    from ringlab.calc import max_cached_tokens
    from ringlab.commands.serve_sim import main

    for model, per_block, token_bytes in (("gemma-2-9b", GEMMA2_BLOCK, 42 * GEMMA2_LAYER_TOKEN),
                                          ("llama-2-7b", 16 * LLAMA_7B_TOKEN_BYTES, LLAMA_7B_TOKEN_BYTES)):
        assert main(["--model", model, "--seconds", "1", "--rate", "1", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        tokens = max_cached_tokens(model, "h100-sxm", "bf16")
        assert out["block_bytes"] == per_block
        assert out["blocks"] == tokens * token_bytes // per_block


@pytest.mark.parametrize("seed", range(40))
def test_windowed_tables_and_extra_blocks_keep_the_books(seed):
    """Random allocate / append / fork / hold / free with a window: every table keeps its newest
    ceil(min(L, window) / block_size) blocks, extra blocks are counted, and the used blocks are exactly the
    distinct blocks held (checked against a direct count after every operation)."""
    import numpy as np

    from ringlab.serving import BlockManager, OutOfBlocksError

    rng = np.random.default_rng(seed)
    bs, window = int(rng.integers(1, 5)), int(rng.integers(1, 12))
    bm = BlockManager(int(rng.integers(6, 40)), bs, enable_prefix_caching=False, window=window)
    live, extra, next_id = {}, {}, 0
    for _ in range(300):
        op = rng.integers(0, 5)
        try:
            if op == 0 or not live:
                tokens = list(rng.integers(0, 3, size=int(rng.integers(1, 20))))
                need = _ceil(min(len(tokens), window), bs)
                assert bm.blocks_needed([tokens]) == need
                bm.allocate(next_id, tokens)
                live[next_id], extra[next_id], next_id = len(tokens), 0, next_id + 1
            else:
                seq = list(live)[int(rng.integers(0, len(live)))]
                if op == 1:
                    bm.append_token(seq, int(rng.integers(0, 3)))
                    live[seq] += 1
                elif op == 2:
                    bm.fork(seq, next_id)
                    live[next_id], extra[next_id], next_id = live[seq], 0, next_id + 1
                elif op == 3:
                    count = int(rng.integers(0, 4))
                    bm.hold(seq, count)
                    extra[seq] = count
                else:
                    bm.free(seq)
                    del live[seq], extra[seq]
        except OutOfBlocksError:
            pass
        bm.check_invariants()
        held = set()
        for seq, length in live.items():
            table = bm.block_table(seq)
            kept = [b for b in table if b is not None]
            assert len(table) == _ceil(length, bs) and len(kept) == _ceil(min(length, window), bs)
            assert table[len(table) - len(kept):] == kept  # the newest ones
            assert len(bm.held_blocks(seq)) == len(kept) + extra[seq]
            held.update(bm.held_blocks(seq))
        assert bm.num_used_blocks == len(held)
    for seq in list(live):
        bm.free(seq)
    bm.check_invariants()
    assert bm.num_free_blocks == bm.num_blocks


def test_window_and_hold_arguments_are_checked():
    from ringlab.serving import BlockManager

    with pytest.raises(ValueError, match="prefix caching"):
        BlockManager(8, 4, window=16)
    with pytest.raises(ValueError, match="window"):
        BlockManager(8, 4, enable_prefix_caching=False, window=0)
    bm = BlockManager(8, 4)
    bm.allocate("a", [1, 2, 3])
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="count"):
            bm.hold("a", bad)
    with pytest.raises(ValueError, match="unknown"):
        bm.hold("b", 1)
    from ringlab.serving import OutOfBlocksError
    with pytest.raises(OutOfBlocksError):
        bm.hold("a", 8)
    bm.check_invariants()
    assert bm.num_used_blocks == 1


@pytest.mark.parametrize("model, blocks", [("gemma-2-9b", 300), ("mistral-7b", 120), ("nemotron-h-56b", 1600),
                                           ("gpt-oss-20b", 200)])
@pytest.mark.parametrize("config", [dict(), dict(preemption="swap", swap_bandwidth=64e9),
                                    dict(chunked_prefill=True, max_num_batched_tokens=256),
                                    dict(reserve_decode=False, watermark=0.0)])
def test_random_traces_on_windowed_and_hybrid_models_keep_the_books(model, blocks, config):
    """Parallel sampling, preemption by recompute and swap, chunked prefill and the naive policy on models with
    windows and Mamba state: the allocator's books hold after every step, and with the fixed policy every
    request that is not rejected finishes."""
    from ringlab.serving import poisson_requests

    requests = poisson_requests(24, rate=200.0, prompt_len=150, output_len=200, n=2, seed=7,
                                shared_prefix_len=40 if model != "mistral-7b" else 0)
    trace = simulate(requests, model, "h200", blocks, 16, SchedulerConfig(**config), check_invariants=True)
    if config.get("reserve_decode", True):
        assert trace.count("finished") + trace.count("rejected") == 24 and not trace.livelock


@pytest.mark.parametrize("name", ["mistral-7b", "gemma-2-9b-it", "gpt-oss-20b"])
@pytest.mark.parametrize("config", [dict(), dict(preemption="swap", swap_bandwidth=64e9),
                                    dict(chunked_prefill=True, max_num_batched_tokens=256),
                                    dict(reserve_decode=False, watermark=0.0)])
def test_random_traces_past_a_small_window_keep_the_books(tmp_path, name, config):
    """The same configs with a 64-token window, so that sequences outgrow it: tables release blocks (Mistral)
    and extra blocks stop growing (Gemma-2, gpt-oss) while samples fork, swap and are recomputed."""
    from ringlab.serving import poisson_requests

    cfg = json.loads((HF / f"{name}.json").read_text())
    cfg["sliding_window"] = 64
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    requests = poisson_requests(24, rate=200.0, prompt_len=150, output_len=200, n=2, seed=7)
    trace = simulate(requests, str(path), "h200", 60, 16, SchedulerConfig(**config), check_invariants=True)
    assert sum(trace.preemptions.values()) > 0 and trace.copies > 0  # the hard paths ran
    if config.get("reserve_decode", True):
        assert trace.count("finished") + trace.count("rejected") == 24 and not trace.livelock
