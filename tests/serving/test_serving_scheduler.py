"""The continuous-batching scheduler: the livelock and its fix, completion on random traces, prefix
caching and copy-on-write counts on traces, budgets, chunked prefill, swap, and step times against
ringlab.calc's decode roofline computed separately."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc import decode_step
from ringlab.serving import Request, Scheduler, SchedulerConfig, StepCost, poisson_requests, simulate


def livelock_requests():
    """A holds 32 blocks of a 64-block pool and needs its 33rd; B arrives needing exactly the other 32."""
    return [Request(0, 0.0, tuple(range(512)), 200), Request(1, 1e-6, tuple(range(1000, 1512)), 200)]


# ---- the livelock ------------------------------------------------------------------------------------

def test_naive_policy_cycles_and_the_trace_shows_it():
    trace = simulate(livelock_requests(), num_blocks=64, config=SchedulerConfig.naive(), check_invariants=True)
    assert trace.livelock == (1, 2)  # the state after step 2 is the state after step 1: period 1
    assert trace.count("finished") == 0
    kinds = [(e.kind, e.request_id) for e in trace.events if e.step is not None]
    # B is admitted, evicted, admitted, evicted...; A never gets its block
    assert kinds[:5] == [("admit", 0), ("admit", 1), ("preempt", 1), ("admit", 1), ("preempt", 1)]
    assert kinds[-1] == ("livelock", None)
    assert trace.requests[0]["output_tokens"] == 1  # A's first token, from its prefill; then nothing
    assert trace.metrics()["wasted_prefill_tokens"] == 512 + 1  # full prefill, then 1 token (511 cached)


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_fixed_policy_finishes_the_livelock_trace(mode):
    trace = simulate(livelock_requests(), num_blocks=64, config=SchedulerConfig(preemption=mode, watermark=0.0),
                     check_invariants=True)
    assert trace.livelock is None and trace.count("finished") == 2
    assert trace.requests[0]["output_tokens"] == trace.requests[1]["output_tokens"] == 200


def test_the_summary_and_the_log_say_what_happened():
    naive = simulate(livelock_requests(), num_blocks=64, config=SchedulerConfig.naive())
    assert "LIVELOCK: step 2 repeats the state of step 1" in naive.summary()
    assert "0 finished, 2 unfinished" in naive.summary()
    line = str([e for e in naive.events if e.kind == "preempt"][0])
    assert "step 1" in line and "request 1" in line and "recompute, 32 blocks" in line


def test_a_watermark_alone_also_breaks_this_cycle():
    """Growth may dip into the watermark, so with one block held back some decode gets its block every step."""
    trace = simulate(livelock_requests(), num_blocks=64, config=SchedulerConfig.naive(watermark=0.02))  # 1 block
    assert trace.livelock is None and trace.count("finished") == 2


def test_a_prompt_that_fills_the_pool_exactly_livelocks_naively_and_is_rejected_by_the_fix():
    alone = [Request(0, 0.0, tuple(range(64)), 4)]  # 4 blocks of 16, in a pool of 4: no room to decode
    naive = simulate(alone, num_blocks=4, config=SchedulerConfig.naive())
    assert naive.livelock is not None
    fixed = simulate(alone, num_blocks=4, config=SchedulerConfig(watermark=0.0))
    assert fixed.count("rejected") == 1 and "could never finish" in fixed.rejected[0]


requests_strategy = st.lists(
    st.tuples(st.floats(0, 0.05), st.integers(1, 60), st.integers(1, 30), st.integers(1, 3), st.integers(0, 2)),
    min_size=1, max_size=12)


@settings(max_examples=60)
@given(requests_strategy, st.integers(6, 40), st.sampled_from([1, 4, 16]), st.booleans(),
       st.sampled_from(["recompute", "swap"]), st.sampled_from([0.0, 0.1]), st.booleans())
def test_fixed_policy_always_finishes(rows, num_blocks, block_size, chunked, mode, watermark, caching):
    system = tuple(range(900, 940))
    requests = [Request(i, t, (system[:20 * share] + tuple(range(i * 100, i * 100 + p)))[:max(p, 1)], o, n)
                for i, (t, p, o, n, share) in enumerate(rows)]
    config = SchedulerConfig(max_num_batched_tokens=64, max_num_seqs=8, chunked_prefill=chunked,
                             preemption=mode, watermark=watermark, max_steps=20_000)
    sched = Scheduler("llama-2-7b", "h100-sxm", num_blocks, block_size, config, enable_prefix_caching=caching,
                      check_invariants=True)
    trace = sched.run(requests)
    assert trace.livelock is None and trace.count("unfinished") == 0
    for req, row in zip(sorted(requests, key=lambda r: r.request_id), trace.requests):
        if row["status"] == "finished":
            assert row["output_tokens"] == req.n * req.max_new_tokens
            assert row["ttft_s"] > 0 and row["queueing_s"] >= 0 and row["latency_s"] >= row["ttft_s"]
    assert sched.blocks.sequences() == [] and sched.blocks.num_free_blocks == num_blocks  # no leak
    steps = trace.steps
    assert (steps["decode_tokens"] + steps["prefill_tokens"] + steps["wasted_tokens"] <= 64).all()
    assert (steps["decode_tokens"] <= 8 * 3).all()


# ---- prefix caching and copy-on-write on traces ---------------------------------------------------------

def test_a_shared_system_prompt_reuses_exactly_its_full_blocks():
    system = tuple(range(1_000))
    requests = [Request(i, i * 1.0, system + tuple(range(10_000 + 30 * i, 10_030 + 30 * i)), 8) for i in range(100)]
    sched = Scheduler("llama-2-7b", "h100-sxm", 7_680, 16, SchedulerConfig(max_num_batched_tokens=4096))
    trace = sched.run(requests)
    assert trace.count("finished") == 100 and sched.blocks.evictions == 0
    assert trace.prefix_cache_hits == 99 * 62 == 6_138  # the 63rd block mixes system and own tokens


@settings(max_examples=15)
@given(st.integers(0, 200), st.integers(1, 40), st.integers(0, 10_000))
def test_a_poisson_trace_with_a_system_prompt_hits_exactly_its_full_blocks(shared, count, seed):
    requests = poisson_requests(count, rate=100, prompt_len=300, output_len=20, shared_prefix_len=shared, seed=seed)
    sched = Scheduler("llama-2-7b", "h100-sxm", 5_000, 16)  # no eviction, no preemption
    trace = sched.run(requests)
    assert trace.count("finished") == count and sum(trace.preemptions.values()) == 0
    # every later request finds the system prompt's full blocks, and nothing else (its own tokens are random)
    assert trace.prefix_cache_hits == (count - 1) * (shared // 16)


def test_parallel_sampling_copies_one_block_per_writer_into_a_shared_partial_block():
    requests = [Request(i, i * 1.0, tuple(range(i, i + p)), 5, n) for i, (p, n) in
                enumerate([(17, 2), (32, 3), (33, 4), (5, 1), (40, 3)])]
    trace = simulate(requests, num_blocks=1_000, check_invariants=True)
    assert trace.count("finished") == 5 and sum(trace.preemptions.values()) == 0
    # prompts 17, 33, 40 end in a partial block: n - 1 copies each; 32 ends on a boundary; n = 1 forks nothing
    assert trace.copies == (2 - 1) + (4 - 1) + (3 - 1)


# ---- step times against the calculator -------------------------------------------------------------------

@pytest.mark.parametrize("model, hardware", [("llama-2-7b", "h100-sxm"), ("llama-3-70b", "h200"),
                                             ("mixtral-8x7b", "a100-sxm-80gb")])
@pytest.mark.parametrize("batch, context", [(1, 1), (1, 4096), (7, 300), (64, 2048)])
def test_a_pure_decode_step_costs_what_decode_step_says(model, hardware, batch, context):
    cost = StepCost(model, hardware, 256)
    expected = decode_step(model, hardware, batch, context).step_time_s
    assert cost.step_time(batch, batch * context, batch * context) == pytest.approx(expected, rel=1e-12)


def test_a_lone_request_has_ttft_of_its_prefill_and_tpot_of_decode_steps():
    prompt, out = 300, 6
    trace = simulate([Request(0, 0.0, tuple(range(prompt)), out)], num_blocks=100)
    cost = StepCost("llama-2-7b", "h100-sxm", 2048)
    prefill = cost.step_time(prompt, prompt, prompt * (prompt + 1) // 2)
    decodes = [decode_step("llama-2-7b", "h100-sxm", 1, prompt + k).step_time_s for k in range(1, out)]
    row = trace.requests[0]
    assert row["ttft_s"] == pytest.approx(prefill, rel=1e-12)
    assert row["tpot_s"] == pytest.approx(sum(decodes) / (out - 1), rel=1e-12)
    assert row["queueing_s"] == 0
    assert trace.metrics()["throughput_tokens_per_s"] == pytest.approx(out / (prefill + sum(decodes)), rel=1e-12)


def test_prefill_is_compute_bound_and_decode_memory_bound():
    cost = StepCost("llama-2-7b", "h100-sxm", 4096)
    weights_time = cost.weight_bytes / cost.hardware.hbm_bandwidth
    assert cost.step_time(1, 1, 1) == pytest.approx(weights_time, rel=0.02)  # decode: about the weights
    batch = decode_step("llama-2-7b", "h100-sxm", 4096, 1)  # 4096 tokens through the weights
    assert batch.compute_time_s > batch.memory_time_s  # a long prompt is compute-bound ...
    prefill = cost.step_time(4096, 4096, 4096 * 4097 // 2)
    assert prefill > batch.compute_time_s and prefill > 10 * cost.step_time(1, 1, 1)  # ... plus causal attention


# ---- budgets, chunked prefill, swap, rejection -------------------------------------------------------

def test_a_prompt_over_the_token_budget_needs_chunked_prefill():
    long = [Request(0, 0.0, tuple(range(1_000)), 3)]
    config = SchedulerConfig(max_num_batched_tokens=256)
    trace = simulate(long, num_blocks=200, config=config)
    assert trace.count("rejected") == 1 and "max_num_batched_tokens=256" in trace.rejected[0]
    chunked = simulate(long, num_blocks=200, config=SchedulerConfig(max_num_batched_tokens=256, chunked_prefill=True))
    assert chunked.count("finished") == 1
    assert list(chunked.steps["prefill_tokens"][:4]) == [256, 256, 256, 232]  # ceil(1000 / 256) = 4 steps
    assert chunked.requests[0]["ttft_s"] == pytest.approx(chunked.steps["end_s"][3])


def test_more_samples_than_max_num_seqs_is_rejected():
    trace = simulate([Request(0, 0.0, (1, 2, 3), 4, n=6)], config=SchedulerConfig(max_num_seqs=4))
    assert trace.count("rejected") == 1 and "max_num_seqs=4" in trace.rejected[0]


def test_chunked_prefill_keeps_decodes_running_beside_a_long_prompt():
    requests = [Request(0, 0.0, tuple(range(64)), 50), Request(1, 0.001, tuple(range(5000, 7000)), 2)]
    trace = simulate(requests, num_blocks=500, config=SchedulerConfig(max_num_batched_tokens=512, chunked_prefill=True))
    mixed = (trace.steps["decode_tokens"] == 1) & (trace.steps["prefill_tokens"] == 511)
    assert mixed.sum() >= 3  # the decode token goes first, the prompt fills the rest of the budget


def test_swap_preemption_moves_blocks_and_recomputes_nothing():
    requests = poisson_requests(60, rate=200, prompt_len=200, output_len=200, length_dist="fixed", seed=3)
    swap = simulate(requests, num_blocks=120, config=SchedulerConfig(preemption="swap"), check_invariants=True)
    recompute = simulate(requests, num_blocks=120, config=SchedulerConfig(), check_invariants=True)
    assert swap.count("finished") == recompute.count("finished") == 60
    assert swap.preemptions["swap"] > 0 and swap.preemptions["recompute"] == 0
    assert recompute.preemptions["recompute"] > 0
    # recompute prefills the preempted tokens again; swap only moves them
    assert recompute.steps["prefill_tokens"].sum() > swap.steps["prefill_tokens"].sum() == 60 * 200


def test_max_num_seqs_caps_the_batch():
    requests = poisson_requests(40, rate=1_000, prompt_len=16, output_len=30, length_dist="fixed", seed=0)
    trace = simulate(requests, num_blocks=1_000, config=SchedulerConfig(max_num_seqs=5))
    assert trace.steps["decode_tokens"].max() == 5 and trace.count("finished") == 40


def test_step_numbers_index_the_step_arrays_across_idle_gaps():
    requests = [Request(0, 0.0, tuple(range(20)), 3), Request(1, 5.0, tuple(range(20)), 3)]  # idle from ~12 ms to 5 s
    trace = simulate(requests, num_blocks=50)
    admit = [e for e in trace.events if e.kind == "admit" and e.request_id == 1][0]
    assert admit.step == 3 and trace.steps["start_s"][admit.step] == 5.0 and trace.num_steps == 6


def test_max_steps_stops_the_run_and_says_so():
    trace = simulate([Request(0, 0.0, (1, 2, 3), 50)], num_blocks=10, config=SchedulerConfig(max_steps=7))
    assert trace.num_steps == 7 and trace.events[-1].kind == "step limit" and trace.count("unfinished") == 1


def test_the_same_seed_gives_the_same_trace():
    a = simulate(poisson_requests(80, rate=50, seed=7, n=2), num_blocks=300).metrics()
    b = simulate(poisson_requests(80, rate=50, seed=7, n=2), num_blocks=300).metrics()
    assert a == b


# ---- request generators and errors -----------------------------------------------------------------------

def test_poisson_arrivals_have_the_asked_rate_and_shared_prefix():
    reqs = poisson_requests(20_000, rate=50.0, prompt_len=100, output_len=10, shared_prefix_len=40,
                            shared_fraction=0.5, seed=0)
    gaps = np.diff([r.arrival_s for r in reqs])
    assert abs(gaps.mean() - 1 / 50) < 4 * (1 / 50) / np.sqrt(len(gaps))  # within 4 standard errors
    prefixes = Counter(r.prompt[:40] for r in reqs)
    (system, shared), (_, runner_up) = prefixes.most_common(2)
    assert abs(shared / len(reqs) - 0.5) < 0.02 and runner_up == 1  # one system prompt; the rest are random
    assert all(len(r.prompt) >= 1 for r in reqs)
    assert all(1 <= r.max_new_tokens <= 19 for r in reqs)  # uniform on 1 .. 2 x 10 - 1
    timed = poisson_requests(seconds=2.0, rate=100.0, seed=1)
    assert all(r.arrival_s < 2.0 for r in timed) and 150 < len(timed) < 250


@pytest.mark.parametrize("kwargs, match", [
    (dict(rate=0, num_requests=5), "rate"), (dict(rate=1), "num_requests, seconds"),
    (dict(num_requests=5, length_dist="zipf"), "distribution"), (dict(num_requests=5, shared_fraction=2), "shared"),
    (dict(rate=1e6, seconds=1e6), "shorten the trace"), (dict(num_requests=2, prompt_len=10**9), "prompt_len"),
])
def test_generator_arguments_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        poisson_requests(**kwargs)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(preemption="drop"), ValueError, "preemption"), (dict(watermark=1.0), ValueError, "watermark"),
    (dict(max_num_seqs=0), ValueError, "max_num_seqs"), (dict(chunked_prefill="yes"), TypeError, "chunked_prefill"),
    (dict(max_model_len=0), ValueError, "max_model_len"), (dict(max_model_len=True), TypeError, "max_model_len"),
    (dict(max_model_len=4096.5), TypeError, "max_model_len"),
])
def test_config_arguments_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        SchedulerConfig(**kwargs)


def test_duplicate_request_ids_are_refused():
    with pytest.raises(ValueError, match="unique"):
        simulate([Request(0, 0.0, (1,), 1), Request(0, 0.0, (2,), 1)])


def test_the_prefix_policy_reaches_the_allocator():
    scheduler = Scheduler("llama-2-7b", "h100-sxm", 64, config=SchedulerConfig(prefix_policy="vllm-v1"))
    assert scheduler.blocks.policy == "vllm-v1"
    with pytest.raises(ValueError, match="prefix_policy must be one of uncached-first, vllm-v1"):
        SchedulerConfig(prefix_policy="lru")


def test_a_run_restores_the_garbage_collectors_thresholds_even_on_an_error():
    # a replay collects rarely while it runs (scheduler._rare_collections); the caller's settings come back after
    # it, after nested runs, and after a run that raises
    import gc

    from ringlab.serving.scheduler import _rare_collections

    before = gc.get_threshold()
    with _rare_collections():
        assert gc.get_threshold()[0] >= 100_000
        with _rare_collections():
            pass
        assert gc.get_threshold()[0] >= 100_000  # the outer run still collects rarely
    assert gc.get_threshold() == before
    with pytest.raises(ValueError, match="request ids must be unique"):
        simulate([Request(0, 0.0, [1, 2], 2), Request(0, 0.0, [3], 2)])
    assert gc.get_threshold() == before
