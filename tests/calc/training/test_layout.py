"""Parallel layout: degrees, strides, batch checks, layer assignment to pipeline stages."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.calc import MODELS
from ringlab.calc.training.layout import ParallelLayout, check_layout, chunk_layer_counts, stage_layers


def test_world_size_strides_and_groups():
    lay = ParallelLayout(dp=4, tp=8, pp=2, cp=2, ep=4)
    assert lay.world_size == 4 * 8 * 2 * 2
    assert [lay.stride(d) for d in ("tp", "cp", "dp", "pp")] == [1, 8, 16, 64]
    assert lay.grad_group == 8 and lay.expert_dp == 2
    assert "EP4" in lay.describe() and "128 GPUs" in lay.describe()


@pytest.mark.parametrize("kwargs, match", [
    (dict(tp=0), "tp"), (dict(dp=1.5), "dp"), (dict(dp=2, ep=3), "ep"), (dict(virtual_stages=2), "virtual_stages"),
    (dict(sequence_parallel=True), "sequence_parallel"), (dict(sequence_parallel="yes", tp=2), "sequence_parallel"),
])
def test_bad_layouts(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ParallelLayout(**kwargs)


@pytest.mark.parametrize("model, kwargs, seq, mb, gb, match", [
    ("llama-2-7b", dict(tp=3), 128, 1, 8, "num_attention_heads"),
    ("llama-3-8b", dict(tp=64), 128, 1, 8, "tp=64 must divide num_attention_heads"),
    ("llama-2-7b", dict(pp=64), 128, 1, 8, "model chunks"),
    ("llama-2-7b", dict(cp=4), 100, 1, 8, "2 x cp"),
    ("llama-2-7b", dict(tp=4, sequence_parallel=True), 6, 1, 8, "sequence_parallel"),
    ("llama-2-7b", dict(dp=3), 128, 1, 8, "global_batch"),
    ("llama-2-7b", dict(dp=2, pp=4, virtual_stages=2), 128, 1, 12, "multiple of pp"),
    ("llama-2-7b", dict(dp=2, ep=2), 128, 1, 8, "MoE"),
    ("mixtral-8x7b", dict(dp=16, ep=16), 128, 1, 16, "routed experts"),
])
def test_bad_batches(model, kwargs, seq, mb, gb, match):
    with pytest.raises(ValueError, match=match):
        check_layout(MODELS[model], ParallelLayout(**kwargs), seq, mb, gb)


def test_microbatches():
    b = check_layout(MODELS["llama-2-7b"], ParallelLayout(dp=4, pp=2), 4096, 2, 64)
    assert b.num_microbatches == 64 // (2 * 4)


@given(layers=st.integers(1, 200), chunks=st.integers(1, 200))
def test_chunk_counts_are_balanced_and_complete(layers, chunks):
    if chunks > layers:
        with pytest.raises(ValueError):
            chunk_layer_counts(layers, chunks)
        return
    counts = chunk_layer_counts(layers, chunks)
    assert sum(counts) == layers and len(counts) == chunks
    assert max(counts) - min(counts) <= 1 and max(counts) == -(-layers // chunks)
    # the short chunks sit at the ends: the counts never rise towards either end
    middle = counts.index(max(counts))
    assert list(counts[:middle + 1]) == sorted(counts[:middle + 1])


def test_llama3_405b_stages_drop_a_layer_at_each_end():
    """Grattafiori et al. 2024 sec. 3.3.2: 126 layers on 16 stages, one fewer on the first and the last."""
    m = MODELS["llama-3.1-405b"]
    stages = stage_layers(m, ParallelLayout(pp=16))
    assert [len(s) for s in stages] == [7] + [8] * 14 + [7]
    assert sorted(i for s in stages for i in s) == list(range(126))


def test_interleaved_stages_hold_every_pp_th_chunk():
    m = MODELS["llama-2-7b"]  # 32 layers, 4 stages x 2 chunks of 4
    stages = stage_layers(m, ParallelLayout(pp=4, virtual_stages=2))
    assert stages[0] == (0, 1, 2, 3, 16, 17, 18, 19)
    assert stages[3] == (12, 13, 14, 15, 28, 29, 30, 31)
