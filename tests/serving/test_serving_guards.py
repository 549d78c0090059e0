"""Serving guards (issue 31): a run cut at its step cap says so, traces too large to hold are refused before
they are drawn, a KV pool larger than the GPU is refused naming both sizes, and a bad token leaves the books."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc import get_hardware, get_model
from ringlab.cli import main as cli_main
from ringlab.commands import serve_sim
from ringlab.serving import SchedulerConfig, poisson_requests
from ringlab.serving.blocks import BlockManager, block_bytes
from ringlab.serving.requests import MAX_TRACE_TOKENS
from ringlab.serving.requests import HashedPrompt, Request
from ringlab.serving.scheduler import STEP_LIMIT_SLACK, Scheduler, step_limit


def _run(max_steps: int):
    requests = poisson_requests(rate=20, seconds=5, prompt_len=64, output_len=64, seed=1)
    scheduler = Scheduler("llama-2-7b", "h100-sxm", 2000, config=SchedulerConfig(max_steps=max_steps))
    return requests, scheduler.run(requests)


def test_a_run_cut_at_the_step_cap_is_marked_truncated():
    requests, trace = _run(40)
    m = trace.metrics()
    assert m["steps"] == 40 and m["truncated"] is True
    assert "max_steps=40" in m["truncated_reason"] and m["finished"] < len(requests)
    assert "TRUNCATED" in trace.summary()


def test_a_truncated_run_counts_every_request_and_so_do_combined_runs():
    # requests that never arrived before the cap are unfinished rows, not missing ones; a colocated or
    # disaggregated run with an instance cut short is truncated as a whole (a goodput search must not pass it),
    # and a decode instance cut before some requests arrive no longer loses them (it raised KeyError)
    from ringlab.serving.disagg import colocated, disaggregated
    from ringlab.serving.goodput import meets_p99
    from ringlab.topology import get_cluster

    requests, trace = _run(40)
    statuses = {r["request_id"]: r["status"] for r in trace.requests}
    assert sorted(statuses) == sorted(r.request_id for r in requests)
    assert trace.metrics()["unfinished"] == sum(s == "unfinished" for s in statuses.values()) > 0
    config = SchedulerConfig(max_steps=40)
    both = colocated(requests, 2, num_blocks=2000, config=config).metrics(sla_ttft=100.0, sla_tpot=100.0)
    assert both["truncated"] and both["truncated_reason"].startswith("instance 0 of 2: stopped at max_steps=40")
    split = disaggregated(requests, 1, 1, get_cluster("dgx-h100"), num_blocks=2000, config=config)
    assert sorted(r["request_id"] for r in split.requests) == sorted(r.request_id for r in requests)
    m = split.trace.metrics(sla_ttft=100.0, sla_tpot=100.0)
    assert m["truncated"] and not meets_p99(m, 100.0, 100.0)


def test_a_complete_run_is_not_truncated():
    requests, trace = _run(1_000_000)
    m = trace.metrics()
    assert m["truncated"] is False and m["truncated_reason"] is None
    assert m["finished"] + m["rejected"] == len(requests)
    assert "TRUNCATED" not in trace.summary()


def test_the_default_step_limit_is_the_requested_tokens_plus_the_slack():
    requests = [Request(0, 0.0, (5, 6, 7), 4), Request(1, 0.5, (1,) * 10, 3, n=2),
                Request(2, 1.0, HashedPrompt(1200, (9, 8, 7)), 1)]
    assert step_limit(requests) == STEP_LIMIT_SLACK + (3 + 4) + (10 + 2 * 3) + (1200 + 1)
    assert step_limit([]) == STEP_LIMIT_SLACK


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(st.tuples(st.integers(1, 120), st.integers(1, 40), st.integers(1, 3),
                                 st.floats(0, 0.05)), min_size=1, max_size=10),
       chunked=st.booleans(), budget=st.sampled_from([8, 64, 2048]), seqs=st.sampled_from([1, 3, 256]),
       fast=st.booleans(), prefilled=st.booleans())
def test_a_run_without_preemptions_ends_within_its_requested_tokens(shapes, chunked, budget, seqs, fast, prefilled):
    # the claim behind the default guard: every step that schedules anything computes at least one token, so
    # a run that never preempts ends within sum(prompt + n * max_new_tokens) steps, however low its rate
    if prefilled:
        shapes = [(p, o, 1, t) for p, o, _, t in shapes]  # a decode instance refuses n > 1
    arrival, requests = 0.0, []
    for i, (prompt, output, n, gap) in enumerate(shapes):
        arrival += gap
        requests.append(Request(i, arrival, tuple(range(i * 1000, i * 1000 + prompt)), output, n=n))
    tokens = step_limit(requests) - STEP_LIMIT_SLACK
    config = SchedulerConfig(chunked_prefill=chunked, max_num_batched_tokens=budget, max_num_seqs=seqs,
                             max_steps=tokens)
    trace = Scheduler("llama-2-7b", "h100-sxm", 4000, config=config, fast=fast, prefilled=prefilled).run(requests)
    assert trace.preempted_blocks == 0 and sum(trace.preemptions.values()) == 0
    assert trace.truncated is None and trace.num_steps <= tokens
    assert trace.count("finished") + trace.count("rejected") == len(requests)


@pytest.fixture
def small_cap(monkeypatch):
    class Capped(Scheduler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.config = dataclasses.replace(self.config, max_steps=25)

    monkeypatch.setattr(serve_sim, "Scheduler", Capped)


def test_cli_exit_code_json_field_and_warning_when_truncated(small_cap, capsys):
    code = cli_main(["serve-sim", "--seconds", "5", "--rate", "20", "--json"])
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert code == serve_sim.TRUNCATED == 3
    assert data["truncated"] is True and "max_steps=25" in data["truncated_reason"]
    assert "warning" in err and "max_steps=25" in err and len(err.strip().splitlines()) == 1
    assert cli_main(["serve-sim", "--seconds", "5", "--rate", "20"]) == 3
    assert "TRUNCATED" in capsys.readouterr().out


def test_requests_times_length_is_bounded_before_drawing():
    with pytest.raises(ValueError, match="prompt_len") as exc:
        poisson_requests(rate=100, seconds=10, prompt_len=1_000_000, output_len=128)
    assert f"{MAX_TRACE_TOKENS:,}" in str(exc.value)
    # each bound alone is fine: many short requests, or a few long ones
    assert len(poisson_requests(rate=1, seconds=2, prompt_len=1_000_000 // 8, output_len=1, seed=0)) >= 1


def test_cli_refuses_a_trace_too_large(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["serve-sim", "--seconds", "100", "--rate", "10", "--prompt-len", "1000000"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "prompt_len" in err and "token ids" in err


def test_pool_larger_than_the_gpu_is_refused_naming_both():
    model, hw = get_model("llama-2-7b"), get_hardware("h100-sxm")
    per_block = block_bytes(model, 16, "bf16")
    fit = (hw.memory - model.weight_bytes("bf16")) // per_block
    args = serve_sim.build_parser().parse_args(["--blocks", str(fit)])
    serve_sim._check_pool(args)  # exactly what fits next to the weights
    args.blocks = fit + 1
    with pytest.raises(ValueError) as exc:
        serve_sim._check_pool(args)
    assert f"{fit:,} blocks fit" in str(exc.value) and "h100-sxm" in str(exc.value)


def test_cli_refuses_140_tb_of_cache_on_an_h100(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["serve-sim", "--blocks", "16777216", "--seconds", "1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--blocks 16,777,216" in err and "TB" in err and "80.00 GB" in err


@pytest.mark.parametrize("token", [[1], {2: 3}, {4}, bytearray(b"x")])
def test_unhashable_token_leaves_the_books_unchanged(token):
    blocks = BlockManager(8, 4)
    blocks.allocate("a", [1, 2, 3, 4, 5, 6, 7])
    blocks.fork("a", "b")
    before = (blocks.fingerprint(), blocks.block_table("a"), blocks.block_table("b"), blocks.tokens("b"))
    with pytest.raises(TypeError, match="token_id"):
        blocks.append_token("b", token)
    blocks.check_invariants()
    assert (blocks.fingerprint(), blocks.block_table("a"), blocks.block_table("b"), blocks.tokens("b")) == before
    blocks.append_token("b", 8)  # still usable
    blocks.check_invariants()
