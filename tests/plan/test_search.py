"""plan_train against the brute force it replaces, its floors against train_plan, and its refusals."""

import itertools
import random

import pytest
from hypothesis import given, settings, strategies as st

from ringlab.calc import ModelConfig
from ringlab.calc.training.plan import train_plan
from ringlab.plan.space import Candidate, Space, TrainJob, divisors, enumerate_space
from ringlab.plan.train import _Floors, brute_force, evaluate, peak_memory, plan_train

SMALL = Space(max_micro_batch=2, max_virtual_stages=2)


def small_model(layers: int, heads: int, kv: int, hidden: int = 512) -> ModelConfig:
    """A Llama-style model small enough for brute force."""
    return ModelConfig.from_hf_config(dict(model_type="llama", hidden_size=hidden, intermediate_size=4 * hidden,
                                           num_attention_heads=heads, num_key_value_heads=kv,
                                           num_hidden_layers=layers, vocab_size=8192, max_position_embeddings=4096,
                                           tie_word_embeddings=False), name=f"tiny-{layers}x{hidden}")


def oracle(job: TrainJob, space: Space) -> list[tuple[tuple, float]]:
    """Brute force written here from train_plan alone: every degree, every knob, the best of each shape."""
    model, n = job.model, job.gpus
    best: dict = {}
    for tp, pp, cp in itertools.product(divisors(n), repeat=3):
        if n % (tp * pp * cp):
            continue
        dp = n // (tp * pp * cp)
        for mb, v, zero, rec in itertools.product(range(1, space.max_micro_batch + 1),
                                                  range(1, space.max_virtual_stages + 1), space.zero, space.recompute):
            if (cp > 1 and job.seq_len // cp < space.min_cp_tokens) or (v > 1 and pp == 1):
                continue
            sp = tp > 1 and (job.seq_len // cp) % tp == 0
            try:
                c = Candidate(dp, tp, pp, cp, 1, v, sp, zero, rec, mb)
                plan = evaluate(job, c)
            except ValueError:
                continue
            if peak_memory(plan) > job.usable_memory:
                continue
            t = plan.time.step_time
            if c.shape not in best or t < best[c.shape]:
                best[c.shape] = t
    return sorted(best.items(), key=lambda kv: (kv[1], kv[0]))


@pytest.mark.slow
def test_search_equals_a_brute_force_oracle_on_a_small_cluster():
    job = TrainJob(small_model(8, 8, 4), 16, "dgx-h100", 2048, 32, margin=0.1)
    search = plan_train(job, top=8, space=SMALL)
    expected = oracle(job, SMALL)[:8]
    assert [r.step_seconds for r in search.layouts] == pytest.approx([t for _, t in expected], rel=1e-12)
    assert search.evaluated < search.configurations
    assert brute_force(job, SMALL, top=8)[0].step_seconds == pytest.approx(expected[0][1], rel=1e-12)


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(gpus=st.sampled_from([8, 16, 32]), layers=st.sampled_from([4, 6]), heads=st.sampled_from([4, 8]),
       batch=st.sampled_from([16, 32, 64]), seq=st.sampled_from([1024, 2048]), margin=st.sampled_from([0.1, 0.9]))
def test_pruning_never_drops_the_best(gpus, layers, heads, batch, seq, margin):
    """Against brute force over the same space; a margin of 0.9 (8 GB left of 80) makes memory bind."""
    job = TrainJob(small_model(layers, heads, 2, hidden=1024), gpus, "dgx-h100", seq, batch, margin=margin)
    search = plan_train(job, top=3, space=SMALL)
    truth = brute_force(job, SMALL, top=3)
    assert [r.step_seconds for r in search.layouts] == pytest.approx([r.step_seconds for r in truth], rel=1e-12)


def test_floors_are_below_what_train_plan_says():
    job = TrainJob("llama-3-8b", 64, "dgx-h100", 4096, 128)
    configs, _ = enumerate_space(job, Space())
    floors = _Floors(job)
    for c in random.Random(0).sample(configs, 40):
        plan = evaluate(job, c)
        assert floors.step(c) <= plan.time.step_time
        assert floors.memory(c) <= peak_memory(plan)


def test_every_shape_uses_all_gpus_and_refusals_are_counted():
    job = TrainJob("llama-3-8b", 64, "dgx-h100", 4096, 256)
    configs, refused = enumerate_space(job, Space())
    assert all(c.dp * c.tp * c.pp * c.cp == 64 for c in configs)
    assert refused.shapes["tp does not split the attention heads"] == 1  # tp = 64 > 32 heads
    assert refused.shapes["more pipeline stages than layers"] == 1  # pp = 64 > 32 layers
    assert all(c.sequence_parallel == (c.tp > 1) for c in configs)


def test_evaluate_is_train_plan():
    job = TrainJob("llama-3-8b", 16, "dgx-h100", 4096, 64)
    c = Candidate(4, 2, 2, 1, 1, 1, True, "zero1", "full", 1)
    plan = train_plan("llama-3-8b", c.layout(), 4096, 1, 64, "zero1", "full", topology="dgx-h100")
    assert evaluate(job, c).time.step_time == plan.time.step_time


@pytest.mark.parametrize("kwargs, word", [(dict(gpus=12), "whole 8-GPU nodes"), (dict(topology="tpu"), "topology"),
                                          (dict(margin=0.95), "margin"), (dict(seq_len=0), "seq_len")])
def test_bad_jobs_name_the_argument(kwargs, word):
    args = dict(model="llama-3-8b", gpus=16, topology="dgx-h100", seq_len=4096, global_batch=64) | kwargs
    with pytest.raises(ValueError, match=word):
        TrainJob(**args)


def test_top_must_be_a_positive_int():
    with pytest.raises(ValueError, match="top"):
        plan_train(TrainJob("llama-3-8b", 8, "dgx-h100", 4096, 8), top=0)
