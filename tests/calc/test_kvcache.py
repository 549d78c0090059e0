import pytest
from hypothesis import given, settings, strategies as st

from ringlab.calc import MODELS, format_bytes, kv_cache_bytes, kv_cache_bytes_per_token, kv_heads_per_rank
from ringlab.calc import max_cached_tokens
from ringlab.calc.models import ModelConfig

L70 = MODELS["llama-2-70b"]


def test_llama2_70b_interview_numbers():
    assert kv_cache_bytes_per_token("llama-2-70b", "fp16") == 2 * 80 * 8 * 128 * 2 == 327_680
    total = kv_cache_bytes("llama-2-70b", tokens=4096, batch_size=32, dtype="fp16")
    assert total == 42_949_672_960 == 40 * 2**30
    assert format_bytes(total) == "42,949,672,960 B (42.95 GB / 40.00 GiB)"
    # the common mistake: num_attention_heads (64) instead of num_key_value_heads (8) -> 8x, 343.6 GB
    mha = L70.replace(num_key_value_heads=64)
    assert kv_cache_bytes(mha, 4096, 32) == 8 * total and round(8 * total / 1e9, 1) == 343.6


def test_mqa_and_dtypes():
    f7 = MODELS["falcon-7b"]
    assert kv_cache_bytes_per_token(f7, "bf16") == 2 * 32 * 1 * 64 * 2
    assert kv_cache_bytes_per_token(L70, "fp8") == kv_cache_bytes_per_token(L70, "int8") == 327_680 // 2
    assert kv_cache_bytes_per_token(L70, "fp32") == 2 * 327_680


def test_mla_latent_has_no_factor_two():
    ds = MODELS["deepseek-v3"]
    assert kv_cache_bytes_per_token(ds, "bf16") == 61 * (512 + 64) * 2 == 70_272
    # TP does not split the latent: each rank holds all of it
    assert kv_cache_bytes_per_token(ds, "bf16", tp=8) == 70_272
    # versus what full MHA K/V of 128 heads x 192/128 dims would cost
    assert kv_cache_bytes_per_token(ds, "bf16") < 61 * 128 * (192 + 128) * 2 / 50


def test_sliding_window_caps_tokens():
    m = MODELS["mistral-7b"]
    per_token = kv_cache_bytes_per_token(m, "fp16")
    assert per_token == 2 * 32 * 8 * 128 * 2
    assert kv_cache_bytes(m, 1000) == 1000 * per_token
    assert kv_cache_bytes(m, 32768) == kv_cache_bytes(m, 4096) == 4096 * per_token
    # Qwen2 with use_sliding_window: false has no window
    assert MODELS["qwen2-72b"].sliding_window is None
    assert kv_cache_bytes("qwen2-72b", 100_000) == 100_000 * kv_cache_bytes_per_token("qwen2-72b")


def test_partial_sliding_window_layers():
    m = ModelConfig.from_hf_config(dict(model_type="qwen2", hidden_size=256, num_attention_heads=4,
                                        num_key_value_heads=2, num_hidden_layers=6, intermediate_size=512,
                                        vocab_size=100, sliding_window=10, use_sliding_window=True,
                                        max_window_layers=4))
    per_layer = 2 * 2 * 64 * 2
    assert kv_cache_bytes(m, 50) == per_layer * (4 * 50 + 2 * 10)


def test_tensor_parallel_split_and_replication():
    assert kv_heads_per_rank(L70, 4) == 2 and kv_heads_per_rank(L70, 8) == 1 and kv_heads_per_rank(L70, 16) == 1
    assert kv_cache_bytes_per_token(L70, tp=4) == 327_680 // 4
    # tp=16 > 8 KV heads: each rank still holds one whole head (replicated), not half a head
    assert kv_cache_bytes_per_token(L70, tp=16) == kv_cache_bytes_per_token(L70, tp=8) == 327_680 // 8
    with pytest.raises(ValueError, match="num_attention_heads=71"):  # whole query heads per rank, as vLLM asserts
        kv_cache_bytes_per_token("falcon-7b", tp=8)
    with pytest.raises(ValueError, match="tp=3"):
        kv_cache_bytes_per_token(L70, tp=3)
    with pytest.raises(ValueError, match="tp=12"):
        kv_cache_bytes_per_token(L70, tp=12)


def test_paged_blocks_round_up_per_sequence():
    per_token = 327_680
    assert kv_cache_bytes(L70, 17, batch_size=3, block_size=16) == 3 * 32 * per_token
    assert kv_cache_bytes(L70, 32, batch_size=3, block_size=16) == 3 * 32 * per_token
    m = MODELS["mistral-7b"]
    assert kv_cache_bytes(m, 10_000, block_size=16) == kv_cache_bytes(m, 4096)  # 4096 is whole blocks


@pytest.mark.parametrize("kwargs, match", [
    (dict(tokens=0), "tokens"), (dict(tokens=-5), "tokens"), (dict(tokens=10, batch_size=0), "batch_size"),
    (dict(tokens=10, block_size=0), "block_size"), (dict(tokens=10, tp=0), "tp"),
    (dict(tokens=10, dtype="fp4x"), "unknown dtype"),
])
def test_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        kv_cache_bytes(L70, **kwargs)


def test_bad_types_and_names():
    with pytest.raises(TypeError):
        kv_cache_bytes(L70, 2.5)
    with pytest.raises(ValueError, match="Close matches"):
        kv_cache_bytes("llama-2-70", 10)


def test_max_cached_tokens_by_hand():
    # llama-2-7b bf16 on a100-sxm-80gb: 0.9 x 80e9 - 2 x 6,738,415,616 bytes of weights
    budget = 72_000_000_000 - 2 * 6_738_415_616
    per_token = 2 * 32 * 32 * 128 * 2
    assert max_cached_tokens("llama-2-7b", "a100-sxm-80gb") == budget // per_token
    assert max_cached_tokens("llama-2-7b", "a100-sxm-80gb", block_size=16) == budget // per_token // 16 * 16
    # fp8 cache doubles the tokens (up to flooring)
    assert max_cached_tokens("llama-2-7b", "a100-sxm-80gb", kv_dtype="fp8") == budget // (per_token // 2)
    # TP=4 for llama-2-70b on H100: weights and KV heads both split by 4
    budget70 = 72_000_000_000 - (2 * 68_976_648_192) // 4
    assert max_cached_tokens(L70, "h100-sxm", tp=4) == budget70 // (327_680 // 4)
    # weights do not fit: nothing left
    assert max_cached_tokens("llama-3.1-405b", "h100-sxm") == 0
    assert max_cached_tokens("llama-2-7b", "a100-sxm-80gb", reserve_bytes=10**9) < budget // per_token


def test_max_cached_tokens_rejects_bad_settings():
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        max_cached_tokens("llama-2-7b", "l4", gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="reserve_bytes"):
        max_cached_tokens("llama-2-7b", "l4", reserve_bytes=-1)
    with pytest.raises(ValueError, match="unknown hardware"):
        max_cached_tokens("llama-2-7b", "a100")


DENSE_NAMES = [n for n, m in MODELS.items() if not m.uses_mla]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(MODELS)), tokens=st.integers(1, 4096), batch=st.integers(1, 64),
       dtype=st.sampled_from(["fp16", "bf16", "fp8", "fp32"]))
def test_linear_in_tokens_and_batch_below_window(name, tokens, batch, dtype):
    windows = [layer.window for layer in MODELS[name].layers if layer.window]
    tokens = min([tokens, *windows])
    per_token = kv_cache_bytes_per_token(name, dtype)
    assert kv_cache_bytes(name, tokens, batch, dtype) == tokens * batch * per_token


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(DENSE_NAMES), tp=st.sampled_from([1, 2, 4, 8, 16, 32]), tokens=st.integers(1, 10**5))
def test_tp_shards_cover_the_whole_cache(name, tp, tokens):
    m = MODELS[name]
    if (tp <= m.kv_heads and m.kv_heads % tp) or (tp > m.kv_heads and tp % m.kv_heads) or m.num_attention_heads % tp:
        return
    per_gpu = kv_cache_bytes(m, tokens, tp=tp)
    total = kv_cache_bytes(m, tokens)
    assert per_gpu * tp >= total
    assert (per_gpu * tp == total) == (tp <= m.kv_heads)


@settings(max_examples=60, deadline=None)
@given(tokens=st.integers(1, 10**5), block=st.integers(1, 512))
def test_paging_never_saves_memory_and_wastes_less_than_a_block(tokens, block):
    exact, paged = kv_cache_bytes(L70, tokens), kv_cache_bytes(L70, tokens, block_size=block)
    assert exact <= paged < exact + block * 327_680
