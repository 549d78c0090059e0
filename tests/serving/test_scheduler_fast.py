"""The scheduler's fast path (plain decode steps run in bulk) against its step-by-step reference: on random
small workloads (mixed lengths, parallel sampling, shared prefixes, pools tight enough to preempt by recompute
and by swap, chunked prefill, watermarks, the naive policy, a windowed model, a decode instance) both give the
same per-request records, events, step rows and counters. Plus the pieces it is built from: bulk step times
equal the one-step roofline bit for bit, bulk cache reads equal the per-sequence sum, and the allocator's bulk
append refuses tokens that would need a block."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ringlab.calc.models import get_model
from ringlab.serving import Request, SchedulerConfig, StepCost
from ringlab.serving.blocks import POLICIES, BlockManager, cache_layout
from ringlab.serving.requests import HashedPrompt, SequenceTokens, sampled_token
from ringlab.serving.scheduler import Scheduler

SMALL_WINDOW = dataclasses.replace(get_model("mistral-7b"), sliding_window=24, name="mistral-7b-window-24")


def _requests(draw_lengths, prefix, alphabet, n_values, seed):
    """Requests from hypothesis-drawn (gap, prompt, output, n, shares-prefix) tuples; prompt tokens from a small
    ``alphabet`` so that unrelated prompts may share blocks too."""
    rng = np.random.default_rng(seed)
    out, now = [], 0.0
    for i, (gap, prompt, output, n_index, shared) in enumerate(draw_lengths):
        now += gap
        own = tuple(int(t) for t in rng.integers(0, alphabet, size=prompt))
        out.append(Request(i, now, (prefix if shared else ()) + own, output, n_values[n_index % len(n_values)]))
    return out


def _run(requests, fast, model, blocks, block_size, config, caching, **kwargs):
    scheduler = Scheduler(model, "h100-sxm", blocks, block_size, config, enable_prefix_caching=caching,
                          check_invariants=fast, fast=fast, **kwargs)
    spans = []
    if fast:
        bulk = scheduler._decode_span

        def counted(step, arrival):
            spans.append(bulk(step, arrival))
            return spans[-1]

        scheduler._decode_span = counted
    return scheduler.run(requests), spans


def _same(fast, slow):
    assert fast.requests == slow.requests
    assert fast.events == slow.events
    assert fast.steps.keys() == slow.steps.keys()
    for name, column in slow.steps.items():
        assert column.dtype == fast.steps[name].dtype
        assert np.array_equal(fast.steps[name], column), name  # floats too: bit for bit
    for name in ("livelock", "truncated", "preemptions", "preempted_blocks", "rejected", "prefix_cache_hits",
                 "copies", "end_s"):
        assert getattr(fast, name) == getattr(slow, name), name


LOAD = st.lists(st.tuples(st.sampled_from([0.0, 1e-4, 3e-3, 0.02, 0.2]), st.integers(1, 60), st.integers(1, 50),
                          st.integers(0, 3), st.booleans()), min_size=1, max_size=10)


@settings(max_examples=60, deadline=None)
@given(load=LOAD, seed=st.integers(0, 2**16), block_size=st.sampled_from([1, 2, 4, 16]),
       blocks=st.integers(8, 120), budget=st.sampled_from([24, 64, 2048]), seqs=st.sampled_from([3, 8, 256]),
       chunked=st.booleans(), preemption=st.sampled_from(["recompute", "swap"]), naive=st.booleans(),
       watermark=st.sampled_from([0.0, 0.05]), caching=st.booleans(), windowed=st.booleans(),
       prefix_len=st.integers(0, 40), alphabet=st.sampled_from([2, 1000]), max_steps=st.sampled_from([60, 2000]),
       policy=st.sampled_from(POLICIES))
def test_the_fast_path_gives_the_reference_trace(load, seed, block_size, blocks, budget, seqs, chunked, preemption,
                                                 naive, watermark, caching, windowed, prefix_len, alphabet,
                                                 max_steps, policy):
    prefix = tuple(range(prefix_len))
    requests = _requests(load, prefix, alphabet, (1, 1, 2, 3), seed)
    make = SchedulerConfig.naive if naive else SchedulerConfig
    config = make(max_num_batched_tokens=budget, max_num_seqs=seqs, chunked_prefill=chunked, preemption=preemption,
                  watermark=watermark, swap_bandwidth=25e9, max_steps=max_steps, prefix_policy=policy)
    model = SMALL_WINDOW if windowed else "llama-2-7b"
    caching = caching and not windowed  # a window has no prefix caching
    fast, _ = _run(requests, True, model, blocks, block_size, config, caching)
    slow, _ = _run(requests, False, model, blocks, block_size, config, caching)
    _same(fast, slow)


@settings(max_examples=40, deadline=None)
@given(load=LOAD, seed=st.integers(0, 2**16), blocks=st.integers(12, 120), chunked=st.booleans(),
       preemption=st.sampled_from(["recompute", "swap"]), policy=st.sampled_from(POLICIES))
def test_hashed_prompts_take_the_fast_path_the_same_way(load, seed, blocks, chunked, preemption, policy):
    # a trace's prompts (HashedPrompt, kept as given by an admitted sample): hash blocks of 8 tokens from a few
    # ids, so prompts share blocks, a waiting head's block can be filled by a decode, and blocks straddle the
    # end of a prompt and the start of its output
    rng = np.random.default_rng(seed)
    requests, now = [], 0.0
    for i, (gap, prompt, output, n_index, shared) in enumerate(load):
        now += gap
        ids = tuple(int(h) for h in rng.integers(0, 4, size=-(-prompt // 8)))
        ids = ((0, 1) + ids)[:len(ids)] if shared else ids
        requests.append(Request(i, now, HashedPrompt(prompt, ids, 8), output, (1, 1, 2, 3)[n_index]))
    config = SchedulerConfig(max_num_batched_tokens=64, chunked_prefill=chunked, preemption=preemption,
                             swap_bandwidth=25e9, prefix_policy=policy)
    fast, _ = _run(requests, True, "llama-2-7b", blocks, 4, config, True)
    slow, _ = _run(requests, False, "llama-2-7b", blocks, 4, config, True)
    _same(fast, slow)


@settings(max_examples=15, deadline=None)
@given(load=LOAD, seed=st.integers(0, 2**16), blocks=st.integers(20, 200))
def test_a_decode_instance_takes_the_fast_path_the_same_way(load, seed, blocks):
    requests = _requests(load, (), 1000, (1,), seed)
    config = SchedulerConfig(max_num_batched_tokens=64)
    fast, _ = _run(requests, True, "llama-2-7b", blocks, 4, config, True, prefilled=True)
    slow, _ = _run(requests, False, "llama-2-7b", blocks, 4, config, True, prefilled=True)
    _same(fast, slow)


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_a_busy_trace_runs_mostly_in_bulk_and_still_matches(preemption):
    """Forty requests of n = 1..2 in a pool that forces preemptions: most steps run in spans, and the traces
    agree (so the equality above is not the reference path compared with itself)."""
    rng = np.random.default_rng(7)
    requests = [Request(i, 0.1 * i, tuple(int(t) for t in rng.integers(0, 50, size=int(rng.integers(5, 90)))),
                        int(rng.integers(20, 120)), 1 + i % 2) for i in range(40)]
    config = SchedulerConfig(max_num_batched_tokens=256, preemption=preemption, swap_bandwidth=25e9)
    fast, spans = _run(requests, True, "llama-2-7b", 120, 4, config, True)
    slow, _ = _run(requests, False, "llama-2-7b", 120, 4, config, True)
    _same(fast, slow)
    assert sum(fast.preemptions.values()) > 0
    assert sum(spans) > 0.6 * fast.num_steps  # steps run in bulk
    assert max(spans) > 10


def test_a_decode_that_fills_a_waiting_prompt_s_block_lets_it_in_mid_span():
    """Request 1's prompt is request 0's prompt and the next 16 tokens request 0 will generate: in an 8-block
    pool it waits, and is admitted in the step where request 0's decode fills a block it can share. The span
    hands that step over to the reference (admission and a prefill in the same step), with the same trace."""
    prompt = tuple(range(100, 108))
    follow = prompt + tuple(sampled_token(0, 0, p) for p in range(8, 24)) + (200, 201, 202)
    requests = [Request(0, 0.0, prompt, 17), Request(1, 0.005, follow, 4)]
    config = SchedulerConfig(watermark=0.0)
    scheduler = Scheduler("llama-2-7b", "h100-sxm", 8, 4, config, check_invariants=True)
    handed = []
    hand_over = scheduler._hand_over

    def counted(*args):
        handed.append(args[0])
        return hand_over(*args)

    scheduler._hand_over = counted
    fast = scheduler.run(requests)
    slow, _ = _run(requests, False, "llama-2-7b", 8, 4, config, True)
    _same(fast, slow)
    assert handed  # the admission came in the middle of a span
    first, second = fast.requests
    assert second["queueing_s"] > 0 and second["arrival_s"] + second["queueing_s"] < first["latency_s"]
    assert fast.prefix_cache_hits >= 3  # the prompt's 2 blocks and at least one decoded block


def test_gemma2_extra_blocks_keep_the_reference_path():
    """A model with extra blocks per sequence (Gemma-2's windowed layers beside its global ones) is never run
    in bulk, and its trace is the reference one."""
    requests = [Request(i, 0.0, tuple(range(i, i + 30)), 40) for i in range(4)]
    fast, spans = _run(requests, True, "gemma-2-9b", 200, 16, SchedulerConfig(), True)
    slow, _ = _run(requests, False, "gemma-2-9b", 200, 16, SchedulerConfig(), True)
    _same(fast, slow)
    assert not any(spans)


def test_fast_must_be_a_bool():
    with pytest.raises(TypeError, match="fast"):
        Scheduler("llama-2-7b", "h100-sxm", 64, fast=1)


# ---- the pieces ---------------------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(tokens=st.integers(1, 64), attended=st.lists(st.integers(0, 10**9), min_size=1, max_size=20),
       reads=st.lists(st.integers(0, 10**12), min_size=1, max_size=20), model=st.sampled_from(["llama-2-7b",
                                                                                              "mixtral-8x7b"]))
def test_bulk_step_times_equal_the_one_step_roofline_bit_for_bit(tokens, attended, reads, model):
    cost = StepCost(model, "h100-sxm", 64)
    size = min(len(attended), len(reads))
    bulk = cost.step_times(tokens, attended[:size], reads[:size])
    # the roofline of the numpy arrays StepCost keeps, element by element in float64
    i = tokens - 1
    memory = (cost._bytes[i] + np.array(reads[:size], dtype=np.int64)) / cost.hardware.hbm_bandwidth
    compute = (cost._flops[i] + np.array(attended[:size], dtype=np.int64) * cost.attention_flops_per_token) / cost._peak
    assert bulk == (np.maximum(memory, compute) + cost._comm[i]).tolist()
    assert bulk == [cost.step_time(tokens, 0, a, r) for a, r in zip(attended[:size], reads[:size])]


@pytest.mark.parametrize("model", ["llama-2-7b", "mistral-7b", SMALL_WINDOW])
def test_bulk_cache_reads_are_the_sum_over_sequences(model):
    cost = StepCost(model, "h100-sxm", 64)
    lengths = [1, 7, 23, 24, 25, 4000, 4097]
    expected = [sum(cost.kv_bytes_read(n + k) for n in lengths) for k in range(30)]
    assert cost.kv_bytes_read_steps(lengths, 30) == expected


def test_the_bulk_append_refuses_tokens_that_need_a_block():
    bm = BlockManager(8, 4)
    bm.allocate("a", [1, 2, 3, 4, 5])  # one full block, one slot used in the second
    bm.extend_within_block("a", [6, 7])  # fills slots 2 and 3 of 4: nothing else happens
    assert bm.tokens("a") == [1, 2, 3, 4, 5, 6, 7] and bm.num_free_blocks == 6
    with pytest.raises(ValueError, match="append_token"):
        bm.extend_within_block("a", [8])  # would fill the block (it gets a key)
    bm.append_token("a", 8)
    with pytest.raises(ValueError, match="append_token"):
        bm.extend_within_block("a", [9])  # would start a block
    bm.append_token("a", 9)
    bm.fork("a", "b")
    with pytest.raises(ValueError, match="append_token"):
        bm.extend_within_block("b", [10])  # the last block is shared: copy-on-write
    with pytest.raises(ValueError, match="unknown"):
        bm.extend_within_block("c", [1])
    bm.extend_within_block("a", [])  # nothing to add is always fine
    bm.check_invariants()


@settings(max_examples=40, deadline=None)
@given(held=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=30), max_size=5),
       asked=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=30), min_size=1, max_size=4),
       block_size=st.sampled_from([1, 2, 4]), freed=st.booleans())
def test_new_sequences_never_need_more_blocks_than_their_tables(held, asked, block_size, freed):
    """The scheduler skips the allocator's prompt lookup when the lists' table blocks fit: valid because
    ``blocks_needed`` is at most ``ceil(len / block_size)`` per list, whatever is cached (held or free)."""
    bm = BlockManager(200, block_size)
    for i, tokens in enumerate(held):
        bm.allocate(i, tokens)
        if freed and i % 2:
            bm.free(i)  # its full blocks stay cached, free
    assert bm.blocks_needed(asked) <= sum(-(-len(t) // block_size) for t in asked)


@pytest.mark.parametrize("model", ["llama-2-7b", "mistral-7b", "gemma-2-9b", "gpt-oss-20b", "nemotron-h-56b",
                                   "deepseek-v3"])
def test_a_sequence_s_blocks_are_its_table_and_extra_blocks(model):
    """The arrival check counts ``table_blocks + extra_blocks`` (no per-layer sum per request): the layout's
    ``blocks``, ``ceil(sequence_kv_bytes / block_bytes)``, at every length tried."""
    for block_size in (1, 16):
        layout = cache_layout(model, block_size, "bf16")
        for tokens in [1, 2, 15, 16, 17, 127, 128, 129, 4095, 4096, 4097, 9000]:
            assert layout.blocks(tokens) == layout.table_blocks(tokens) + layout.extra_blocks(tokens)


@settings(max_examples=300, deadline=None)
@given(prompt=st.one_of(st.lists(st.integers(0, 50), min_size=1, max_size=12).map(tuple),
                        st.tuples(st.integers(1, 20), st.integers(1, 4)).flatmap(
                            lambda lb: st.lists(st.integers(0, 9), min_size=-(-lb[0] // lb[1]),
                                                max_size=-(-lb[0] // lb[1])).map(
                                lambda ids: HashedPrompt(lb[0], ids, lb[1])))),
       ops=st.lists(st.one_of(st.tuples(st.just("append"), st.integers(0, 99)),
                              st.tuples(st.just("extend"), st.lists(st.integers(0, 99), max_size=5)),
                              st.tuples(st.just("truncate"), st.integers(0, 10)),
                              st.tuples(st.just("copy"), st.none())), max_size=12),
       cuts=st.lists(st.tuples(st.integers(-30, 30) | st.none(), st.integers(-30, 30) | st.none(),
                               st.sampled_from([None, 1, 2, -1])), max_size=6))
@example(prompt=(0,), ops=[("append", 0), ("append", 0)], cuts=[(1, 0, None)])  # an empty slice past the prompt
def test_a_samples_tokens_read_as_the_list_of_its_prompt_and_output(prompt, ops, cuts):
    # an admitted sample keeps its prompt object and lists only its output (a long prompt is never listed)
    tokens, model = SequenceTokens(prompt), list(prompt)
    for op, arg in ops:
        if op == "append":
            tokens.append(arg)
            model.append(arg)
        elif op == "extend":
            tokens.extend(arg)
            model.extend(arg)
        elif op == "truncate":  # cut back, never into the prompt
            keep = len(prompt) + min(arg, len(model) - len(prompt))
            tokens.truncate(keep)
            del model[keep:]
        else:
            copy = tokens.copy()
            copy.append(-1)  # the copy's output is its own
            assert len(copy) == len(tokens) + 1 and copy.prompt is tokens.prompt
    assert len(tokens) == len(model) and list(tokens) == model and tokens.last() == model[-1]
    assert [tokens[i] for i in range(-len(model), len(model))] == model + model
    for start, stop, step in cuts:
        assert list(tokens[start:stop:step]) == model[start:stop:step]
    for bad in (len(model), -len(model) - 1):
        with pytest.raises(IndexError):
            tokens[bad]
    with pytest.raises(TypeError):
        hash(tokens)
