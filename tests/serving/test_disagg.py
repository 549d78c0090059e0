"""Disaggregated prefill/decode (ringlab.serving.disagg): KV transfer sizes and times from first principles, one
request followed by hand through both roles, conservation over random workloads, the placement rules, refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.serving import HashedPrompt, Request, Scheduler, SchedulerConfig, StepCost, load_trace, trace_requests
from ringlab.serving.goodput import time_scaled
from ringlab.serving.trace import STEP_FIELDS
from ringlab.serving.traces import trace_path
from ringlab.serving import disagg
from ringlab.serving.disagg import best_split, colocated, disaggregated, kv_transfer_s, network_rate, placement
from ringlab.topology import get_cluster

DGX = get_cluster("dgx-h100")
LLAMA7_BYTES_PER_TOKEN = 2 * 32 * 32 * 128 * 2  # K and V x 32 layers x 32 KV heads x head_dim 128 x bf16


def request(rid, arrival, prompt, out):
    return Request(rid, arrival, tuple(range(rid * 100_000, rid * 100_000 + prompt)), out)


def test_kv_transfer_time_over_nvlink_and_the_network():
    size = 1000 * LLAMA7_BYTES_PER_TOKEN  # 524,288,000 B
    assert kv_transfer_s("llama-2-7b", 1000, DGX) == pytest.approx(size / 450e9 + 2e-6)
    # one 400 Gb/s ConnectX-7 per GPU: 50 GB/s, 5 us; at tp=2 each GPU holds half the KV heads
    assert kv_transfer_s("llama-2-7b", 1000, DGX, same_node=False) == pytest.approx(size / 50e9 + 5e-6)
    assert kv_transfer_s("llama-2-7b", 1000, DGX, tp=2, same_node=False) == pytest.approx(size / 2 / 50e9 + 5e-6)
    # DGX-1: 4 x 100 Gb/s for 8 GPUs is 6.25 GB/s per GPU, under its PCIe Gen3 path (16 GB/s)
    assert network_rate(get_cluster("dgx1-v100")) == pytest.approx(4 * 100e9 / 8 / 8)


def test_one_request_through_both_roles_by_hand():
    """Prompt of 300 tokens, 5 output tokens, 1 prefill + 1 decode instance in one node: TTFT is the prefill
    instance's; the decode instance gets the prompt plus the first token at ttft + transfer and decodes 4 tokens,
    one step each, attending 301, 302, 303, 304 tokens."""
    r = request(0, 0.0, 300, 5)
    run = disaggregated([r], 1, 1, DGX)
    alone = Scheduler("llama-2-7b", "h100-sxm", 2048).run([Request(0, 0.0, r.prompt, 1)])
    ttft = alone.requests[0]["ttft_s"]
    row = run.requests[0]
    assert row["status"] == "finished" and row["output_tokens"] == 5
    assert row["ttft_s"] == pytest.approx(ttft)
    transfer = kv_transfer_s("llama-2-7b", 300, DGX)
    assert row["transfer_s"] == pytest.approx(transfer)
    cost = StepCost("llama-2-7b", "h100-sxm", 2048, dtype="bf16")
    decode = sum(cost.step_time(1, 0, n, cost.kv_bytes_read(n)) for n in range(301, 305))
    assert row["latency_s"] == pytest.approx(ttft + transfer + decode)
    assert row["tpot_s"] == pytest.approx((transfer + decode) / 4)


def test_transfers_between_nodes_use_the_network():
    """tp=8 fills a node: the prefill instance is node 0, the decode instance node 1."""
    two = get_cluster("dgx-h100", nodes=2)
    run = disaggregated([request(0, 0.0, 300, 3)], 1, 1, two, tp=8)
    assert run.requests[0]["transfer_s"] == pytest.approx(kv_transfer_s("llama-2-7b", 300, two, 8, same_node=False))


def test_transfers_into_one_decode_instance_queue():
    """Two prompts finishing prefill together on two prefill instances, one decode instance: the second transfer
    waits for the first."""
    reqs = [request(0, 0.0, 500, 2), request(1, 0.0, 500, 2)]
    run = disaggregated(reqs, 2, 1, DGX)
    one = kv_transfer_s("llama-2-7b", 500, DGX)
    assert sorted(r["transfer_s"] for r in run.requests) == pytest.approx([one, 2 * one])


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 2), st.integers(1, 600), st.integers(1, 40)), min_size=1, max_size=12),
       st.integers(1, 3), st.integers(1, 3))
def test_every_request_is_served_once_with_all_its_tokens(shapes, p, d):
    reqs = [request(i, a, n, out) for i, (a, n, out) in enumerate(shapes)]
    run = disaggregated(reqs, p, d, DGX, num_blocks=512)
    assert [r["request_id"] for r in run.requests] == list(range(len(reqs)))
    for r, row in zip(reqs, run.requests):
        assert row["status"] == "finished" and row["output_tokens"] == r.max_new_tokens
        assert row["latency_s"] >= row["ttft_s"] > 0
        assert (row["transfer_s"] is None) == (r.max_new_tokens == 1)
    decoded = sorted(x["request_id"] for t in run.decode for x in t.requests)
    assert decoded == sorted(r.request_id for r in reqs if r.max_new_tokens > 1)


def test_a_trace_s_prompts_are_served_as_their_token_lists_are(monkeypatch):
    # a decode instance gets a HashedPrompt with the first token as its tail, not a tuple of every token: the
    # same requests with listed prompts (the plain path) give the same rows, steps and events on both roles
    decoded = []  # the prompts the decode instances get

    class Spy(Scheduler):
        def run(self, requests):
            if self.prefilled:
                decoded.extend(r.prompt for r in requests)
            return super().run(requests)

    monkeypatch.setattr(disagg, "Scheduler", Spy)
    hashed = time_scaled(trace_requests(load_trace(trace_path("mooncake-conv"), limit=40)))(20.0)
    listed = [Request(r.request_id, r.arrival_s, tuple(r.prompt), r.max_new_tokens) for r in hashed]
    a, b = (disaggregated(reqs, 2, 2, DGX, "llama-3.1-8b", num_blocks=4000, config=SchedulerConfig(chunked_prefill=True))
            for reqs in (hashed, listed))
    assert a.requests == b.requests
    statuses = [row["status"] for row in a.requests]
    assert statuses.count("finished") >= 35 and statuses.count("finished") + statuses.count("rejected") == 40
    for x, y in zip(a.prefill + a.decode, b.prefill + b.decode):
        assert x.requests == y.requests and x.events == y.events and x.prefix_cache_hits == y.prefix_cache_hits
        assert all(np.array_equal(x.steps[name], y.steps[name]) for name in STEP_FIELDS)
    assert sum(t.prefix_cache_hits for t in a.prefill) > 0  # the excerpt shares prefixes
    half = len(decoded) // 2
    assert all(type(p) is HashedPrompt and len(p.tail) == 1 for p in decoded[:half])
    assert [tuple(p) for p in decoded[:half]] == decoded[half:]


def test_one_colocated_instance_is_the_plain_scheduler():
    reqs = [request(i, 0.05 * i, 200 + 37 * i, 3 + i) for i in range(6)]
    plain = Scheduler("llama-2-7b", "h100-sxm", 2048).run(reqs)
    assert colocated(reqs, 1).requests == plain.requests


def test_placement_and_refusals():
    assert placement(DGX, 2).instances == 4
    with pytest.raises(ValueError, match="tp=3 must divide gpus_per_node=8"):
        placement(DGX, 3)
    with pytest.raises(ValueError, match="need 10 GPUs"):
        disaggregated([request(0, 0.0, 10, 2)], 3, 2, DGX, tp=2)
    with pytest.raises(ValueError, match="n=1 requests only"):
        disaggregated([Request(0, 0.0, (1, 2, 3), 2, n=2)], 1, 1, DGX)
    with pytest.raises(ValueError, match="at least two"):
        best_split([request(0, 0.0, 10, 2)], DGX, 0.5, 0.05, tp=8)


def test_best_split_searches_each_layout_and_ranks_them():
    """Two instances (tp=4 on one DGX H100): colocated and 1P:1D, each with the highest rate meeting the SLA; the
    rate found meets when the run is repeated, and the failing rate above it (the bracket) does not."""
    reqs = [request(i, 0.05 * i, 1200 + 97 * (i % 9), 8 + i % 23) for i in range(40)]  # a burst cannot hide
    splits = best_split(reqs, DGX, 0.1, 0.015, tp=4, resolution=0.2, max_runs=12)
    assert sorted(s.label for s in splits) == ["1P:1D", "colocated"]
    assert [s.goodput for s in splits] == sorted((s.goodput for s in splits), reverse=True)
    for s in splits:
        low, high = s.search.bracket
        assert s.goodput == low and high / low <= 1.2
        assert [r.meets for r in s.search.runs if r.rate == low] == [True]
        assert [r.meets for r in s.search.runs if r.rate == high] == [False]


def cli(*argv):
    from ringlab.commands import serve_sim
    return serve_sim.main(list(argv))


def test_cli_split_and_best_split(capsys):
    assert cli("--trace", "azure-conv", "--trace-limit", "40", "--model", "llama-3-8b", "--split", "2:6",
               "--sla-ttft", "500ms", "--sla-tpot", "50ms", "--json") == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert [r["layout"] for r in out["rows"]] == ["2P:6D", "colocated x8"]
    assert out["rows"][0]["kv_transfer_p50_s"] > 0 and out["rows"][1]["kv_transfer_p50_s"] is None
    assert cli("--trace", "azure-conv", "--trace-limit", "30", "--tp", "4", "--best-split", "--sla-ttft", "500ms",
               "--sla-tpot", "50ms") == 0
    text = capsys.readouterr().out
    assert "1P:1D" in text and "colocated" in text and "goodput = the highest rate" in text


@pytest.mark.parametrize("argv, words", [
    (["--split", "2:x"], "expected P:D"),
    (["--split", "0:3"], "expected P:D"),
    (["--split", "5:5"], "need 10 GPUs"),
    (["--split", "1:1", "--tp", "16"], "tp=16 must divide gpus_per_node=8"),
    (["--best-split"], "needs both --sla-ttft and --sla-tpot"),
    (["--split", "1:1", "--best-split", "--sla-ttft", "1s", "--sla-tpot", "1s"], "cannot be combined"),
    (["--split", "1:1", "--topology", "nope"], "invalid choice"),
    (["--nodes", "2"], "--nodes only applies to --split P:D or --best-split"),
    (["--topology", "dgx-a100", "--nodes", "2"], "--nodes and --topology only apply to --split"),
])
def test_cli_refusals(argv, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli("--seconds", "1", *argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1

