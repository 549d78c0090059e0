"""Goodput under an SLA (``Trace.metrics``), the prefix-cache hit rate, ``find_rate``, ``chunk_sweep`` and the
``serve-sim`` options ``--sla-ttft`` / ``--sla-tpot`` / ``--find-rate``."""

import functools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.commands.serve_sim import main
from ringlab.serving import Request, Scheduler, SchedulerConfig, poisson_requests, simulate
from ringlab.serving.goodput import chunk_sweep, find_rate, meets_p99, time_scaled

OLD_KEYS = {  # the keys metrics() had before goodput: none may go
    "requests", "finished", "unfinished", "rejected", "steps", "simulated_s", "output_tokens",
    "throughput_tokens_per_s", "preemptions_recompute", "preemptions_swap", "preempted_blocks",
    "wasted_prefill_tokens", "prefix_cache_hit_blocks", "copy_on_write_copies", "livelock", "truncated",
    "truncated_reason"} | {f"{m}_{s}_s" for m in ("ttft", "tpot", "queueing", "latency")
                           for s in ("mean", "p50", "p99")}
SLA_KEYS = {"sla_ttft_s", "sla_tpot_s", "sla_met", "goodput_requests_per_s", "sla_attainment",
            "sla_ttft_attainment", "sla_tpot_attainment"}


@functools.cache
def loaded_trace():
    """80 requests at 60/s into a pool of 8 sequences: TTFTs spread from a few ms to queueing delays."""
    config = SchedulerConfig(max_num_seqs=8)
    return simulate(poisson_requests(80, rate=60, prompt_len=128, output_len=24, seed=5), num_blocks=400,
                    config=config)


def oracle(trace, ttft, tpot):
    """Goodput and attainment recounted from the per-request records: finished, TTFT within, TPOT within
    (or none: one output token), over the span first arrival .. last step end."""
    rows = trace.requests
    good = [r["status"] == "finished" and r["ttft_s"] <= ttft and (r["tpot_s"] is None or r["tpot_s"] <= tpot)
            for r in rows]
    end = max([r["arrival_s"] for r in rows] + list(trace.steps["end_s"]))
    span = end - min(r["arrival_s"] for r in rows)
    return sum(good), sum(good) / span, sum(good) / len(rows)


def test_metrics_keep_the_old_keys_and_add_goodput_only_with_slas():
    trace = loaded_trace()
    plain = trace.metrics()
    assert set(plain) == OLD_KEYS | {"prefix_cache_hit_rate"}
    assert set(trace.metrics(0.1, 0.01)) == OLD_KEYS | {"prefix_cache_hit_rate"} | SLA_KEYS
    assert {k: plain[k] for k in OLD_KEYS} == {k: trace.metrics(0.1, 0.01)[k] for k in OLD_KEYS}


@settings(max_examples=25, deadline=None)
@given(q_ttft=st.floats(0, 1), q_tpot=st.floats(0, 1))
def test_goodput_is_the_requests_within_both_limits_per_simulated_second(q_ttft, q_tpot):
    trace = loaded_trace()
    ttfts = [r["ttft_s"] for r in trace.requests]
    tpots = [r["tpot_s"] for r in trace.requests if r["tpot_s"] is not None]
    ttft, tpot = float(np.quantile(ttfts, q_ttft)), float(np.quantile(tpots, q_tpot))  # limits among the values
    met, goodput, attainment = oracle(trace, ttft, tpot)
    m = trace.metrics(ttft, tpot)
    assert m["sla_met"] == met and m["sla_attainment"] == pytest.approx(attainment)
    assert m["goodput_requests_per_s"] == pytest.approx(goodput, rel=1e-12)
    assert m["sla_ttft_attainment"] == pytest.approx(np.mean(np.array(ttfts) <= ttft))
    assert m["sla_ttft_s"] == ttft and m["sla_tpot_s"] == tpot


def test_the_workload_spreads_across_the_limits():  # so the property above is not vacuous
    m = loaded_trace().metrics(0.007, 0.0041)
    assert 0.2 < m["sla_ttft_attainment"] < 0.8 and 0.2 < m["sla_tpot_attainment"] < 0.8
    assert m["sla_attainment"] < min(m["sla_ttft_attainment"], m["sla_tpot_attainment"])


def test_a_request_exactly_at_the_limit_meets_it_and_one_ulp_below_misses():
    trace = loaded_trace()
    worst = max(r["ttft_s"] for r in trace.requests)
    assert trace.metrics(sla_ttft=worst)["sla_attainment"] == 1.0
    below = trace.metrics(sla_ttft=float(np.nextafter(worst, 0)))
    assert below["sla_met"] == sum(r["ttft_s"] < worst for r in trace.requests) == len(trace.requests) - 1
    assert below["sla_tpot_attainment"] is None  # no TPOT limit given


def test_one_limit_alone_counts_that_limit_only():
    trace = loaded_trace()
    tpots = sorted(r["tpot_s"] for r in trace.requests if r["tpot_s"] is not None)
    m = trace.metrics(sla_tpot=tpots[len(tpots) // 2])
    single = sum(r["tpot_s"] is None for r in trace.requests)  # one output token: no TPOT, meets it
    assert single > 0 and m["sla_met"] == sum(t <= tpots[len(tpots) // 2] for t in tpots) + single
    assert m["sla_ttft_attainment"] is None


def test_rejected_and_unfinished_requests_miss_the_sla():
    long = Request(1, 0.5, tuple(range(5000)), 4)  # longer than the 2,048-token budget: rejected on arrival
    short = [Request(i, 0.0, tuple(range(100 * i, 100 * i + 40)), 8) for i in (0, 2, 3)]
    m = simulate(short + [long], num_blocks=200).metrics(60.0, 60.0)
    assert (m["rejected"], m["finished"], m["sla_met"]) == (1, 3, 3) and m["sla_attainment"] == 0.75
    cut = simulate(short, num_blocks=200, config=SchedulerConfig(max_steps=5))  # stops before any finishes
    cm = cut.metrics(60.0, 60.0)
    assert cm["truncated"] and cm["unfinished"] == 3 and cm["sla_met"] == 0 and cm["goodput_requests_per_s"] == 0


def test_no_finished_request_gives_zero_goodput_or_none_for_a_zero_span():
    rejected = [Request(0, 0.0, tuple(range(3000)), 4), Request(1, 2.0, tuple(range(3000)), 4)]
    m = simulate(rejected, num_blocks=400).metrics(1.0, 1.0)
    assert (m["finished"], m["sla_met"], m["goodput_requests_per_s"], m["sla_attainment"]) == (0, 0, 0.0, 0.0)
    assert m["simulated_s"] == 2.0  # first arrival to the last (rejected at once)
    one = simulate(rejected[:1], num_blocks=400).metrics(1.0, 1.0)
    assert one["goodput_requests_per_s"] is None and one["sla_attainment"] == 0.0


def test_a_single_token_output_has_no_tpot_and_meets_any_tpot_limit():
    m = simulate([Request(0, 0.0, tuple(range(50)), 1)], num_blocks=50).metrics(1.0, 1e-6)
    assert m["tpot_p99_s"] is None and m["sla_met"] == 1 and m["sla_tpot_attainment"] == 1.0


@pytest.mark.parametrize("value, error", [(0, ValueError), (-1.0, ValueError), (math.nan, ValueError),
                                          (math.inf, ValueError), (7200.0, ValueError), (1e-9, ValueError),
                                          (True, TypeError), ("1", TypeError)])
def test_bad_limits_are_refused_by_name(value, error):
    with pytest.raises(error, match="sla_tpot"):
        loaded_trace().metrics(sla_ttft=1.0, sla_tpot=value)


def test_prefix_cache_hit_rate_is_hits_over_the_full_prompt_blocks_looked_up():
    reqs = poisson_requests(30, rate=20, prompt_len=100, output_len=8, shared_prefix_len=64, seed=2)
    m = simulate(reqs, num_blocks=2000).metrics()
    lookups = sum(len(r.prompt) // 16 for r in reqs)  # one lookup per full block of each prompt
    assert m["preemptions_recompute"] == m["preemptions_swap"] == 0
    assert m["prefix_cache_hit_blocks"] == 4 * 29  # 64 shared tokens: 4 blocks, found by all but the first
    assert m["prefix_cache_hit_rate"] == pytest.approx(4 * 29 / lookups, rel=1e-12)
    assert simulate(reqs, num_blocks=2000, enable_prefix_caching=False).metrics()["prefix_cache_hit_rate"] is None


def test_the_hit_rate_is_not_given_when_preemptions_reallocated_blocks():
    reqs = poisson_requests(40, rate=200, prompt_len=64, output_len=64, shared_prefix_len=32, seed=4)
    m = simulate(reqs, num_blocks=40).metrics()
    assert m["preemptions_recompute"] > 0 and m["prefix_cache_hit_blocks"] > 0 and m["prefix_cache_hit_rate"] is None


# ---- find_rate -----------------------------------------------------------------------------------------------
class _Knee:
    """A stand-in for a run: p99 TTFT 0.1 s up to ``knee`` requests/s, 1 s above (monotone by construction)."""

    def __init__(self, knee):
        self.knee, self.rates = knee, []

    def make(self, rate):
        self.rates.append(rate)
        return UNIT(rate)

    def __call__(self, requests):
        assert requests[-1].arrival_s == pytest.approx(1e7 / self.rates[-1], rel=1e-12)
        ttft = 0.1 if self.rates[-1] <= self.knee else 1.0
        metrics = dict(rejected=0, unfinished=0, livelock=False, truncated=False, finished=2, ttft_p99_s=ttft,
                       tpot_p99_s=0.01, goodput_requests_per_s=None, sla_attainment=None, latency_mean_s=1.0)
        return type("T", (), {"metrics": lambda self, a, b: metrics, "rejected": {}})()


UNIT = time_scaled(  # two requests 1e7 s apart at rate 1: long enough for any rate searched to be sustained
    [Request(0, 0.0, (1,), 1), Request(1, 1e7, (2,), 1)], base_rate=1.0)


@settings(max_examples=40, deadline=None)
@given(knee=st.floats(0.01, 5000), start=st.floats(0.01, 5000), resolution=st.sampled_from([0.005, 0.02, 0.2]))
def test_find_rate_brackets_a_monotone_knee_within_the_resolution(knee, start, resolution):
    run = _Knee(knee)
    s = find_rate(run.make, run, 0.5, 0.05, start_rate=start, resolution=resolution, max_runs=200)
    low, high = s.bracket
    assert s.converged and s.rate == low and low <= knee < high and high / low <= 1 + resolution
    assert [r.rate for r in s.runs] == run.rates and not s.note
    bisections = math.ceil(math.log2(math.log(2) / math.log(1 + resolution)))
    assert len(s.runs) <= 2 + math.ceil(abs(math.log2(knee / start))) + bisections


def test_find_rate_reports_when_it_cannot_bracket():
    knee = _Knee(0.0)
    none = find_rate(knee.make, knee, 0.5, 0.05, start_rate=1.0, min_rate=0.1)
    assert none.rate is None and none.bracket == (None, 0.1) and "no rate down to 0.1/s" in none.note  # min_rate
    assert none.runs[-1].why == "p99 TTFT 1,000.0 ms > 500 ms"
    knee = _Knee(1e9)
    every = find_rate(knee.make, knee, 0.5, 0.05, start_rate=100.0, max_rate=1000.0)
    assert every.rate == 1000.0 and every.bracket == (1000.0, None) and "(max_rate)" in every.note
    knee = _Knee(300.0)
    short = find_rate(knee.make, knee, 0.5, 0.05, start_rate=1.0, max_runs=5)
    assert not short.converged and len(short.runs) == 5 and "max_runs=5" in short.note


def test_find_rate_stops_at_a_request_rejected_at_any_rate(capsys):
    """A prompt longer than the token budget (no chunked prefill) or than the model's context is refused at every
    rate: one run, and the note says which request and why."""
    long = Request(1, 0.5, tuple(range(3000)), 4)
    short = [Request(i, float(i), tuple(range(100 * i, 100 * i + 40)), 8) for i in (0, 2, 3)]
    runs = []
    search = find_rate(time_scaled(short + [long]), lambda reqs: runs.append(1) or simulate(reqs, num_blocks=400),
                       0.5, 0.05, start_rate=1.0)
    assert len(runs) == len(search.runs) == 1 and search.rate is None and search.bracket == (None, 1.0)
    assert search.note.startswith("no rate meets the SLA: 1 of 4 requests are rejected on arrival at any rate "
                                  "(request 1: prompt of 3000 tokens exceeds max_num_batched_tokens=2048")
    assert main(["--trace", "mooncake-conv", "--trace-limit", "12", "--chunked-prefill", "--find-rate",
                 "--sla-ttft", "10s", "--sla-tpot", "100ms"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert "SLA; 1 run " in out and "11 of 12 requests are rejected on arrival at any rate (request 0: prompt 6,758 + " \
        "output 500 tokens exceed max_model_len, llama-2-7b's max_position_embeddings=4,096)" in out


@pytest.mark.parametrize("kwargs, name", [
    (dict(sla_ttft=0), "sla_ttft"), (dict(sla_tpot=1e5), "sla_tpot"), (dict(resolution=0), "resolution"),
    (dict(max_runs=0), "max_runs"), (dict(max_runs=1000), "max_runs"), (dict(start_rate=1e6), "start_rate"),
    (dict(min_rate=-1), "min_rate"),
])
def test_find_rate_refuses_bad_arguments_by_name(kwargs, name):
    args = dict(sla_ttft=0.5, sla_tpot=0.05) | kwargs
    with pytest.raises((ValueError, TypeError), match=name):
        find_rate(UNIT, _Knee(1.0), **args)  # refused before any run


def test_time_scaled_replays_the_same_requests_faster():
    reqs = poisson_requests(20, rate=5, seed=1)
    fast = time_scaled(reqs, 5.0)(20.0)
    assert [r.arrival_s * 4 for r in fast] == pytest.approx([r.arrival_s for r in reqs], rel=1e-12)
    assert [(r.prompt, r.max_new_tokens) for r in fast] == [(r.prompt, r.max_new_tokens) for r in reqs]
    assert time_scaled(reqs)(5.0)[-1].arrival_s == pytest.approx(reqs[-1].arrival_s * (19 / reqs[-1].arrival_s) / 5)
    with pytest.raises(ValueError, match="empty"):
        time_scaled([])
    with pytest.raises(ValueError, match="rate"):
        time_scaled(reqs)(0.0)


def test_the_found_rate_meets_on_a_fresh_run_and_the_upper_bracket_fails():
    reqs = poisson_requests(40, rate=10, prompt_len=128, output_len=8, seed=3)
    config = SchedulerConfig(max_num_seqs=4)

    def run(r):
        return Scheduler("llama-2-7b", "h100-sxm", 200, 16, config).run(r)

    s = find_rate(time_scaled(reqs, 10.0), run, 0.05, 0.02, start_rate=10.0)
    low, high = s.bracket
    assert s.converged and high / low <= 1.02 and len(s.runs) <= 24
    scaled = time_scaled(reqs, 10.0)
    assert meets_p99(run(scaled(low)).metrics(), 0.05, 0.02)
    assert not meets_p99(run(scaled(high)).metrics(), 0.05, 0.02)
    found = next(r for r in s.runs if r.rate == low)  # 40 requests in a fraction of a second: an overload may hide
    assert found.arrival_window_s == pytest.approx(reqs[-1].arrival_s * 10.0 / low, rel=1e-12)
    hidden = (run(scaled(low)).metrics()["latency_mean_s"] + 0.05) / found.arrival_window_s
    assert (f"may be up to {hidden:.0%} lower" if hidden < 1 else "is unknown (a burst)") in s.note


# ---- chunked prefill -------------------------------------------------------------------------------------------
def test_larger_prefill_chunks_trade_tpot_for_ttft():
    """Long prompts (3,000 tokens) arrive while others decode. With chunked prefill a step carries every
    running decode plus at most a chunk of prompt tokens. A step of T tokens of llama-2-7b reads the 13.5 GB of
    weights once and does about 2 x 6.7e9 x T FLOPs, so it is memory-bound (about 4 ms on an H100) below
    T = 989e12 / 3.35e12 ~ 300 tokens (the ridge point) and compute-bound above. A small chunk keeps every step
    near that 4 ms, so decodes see short steps (low TPOT), but a prompt then needs ceil(3000 / chunk) steps, each
    paying the weights' read (high TTFT; at 64 tokens the prefills cannot keep up and requests queue). A large
    chunk finishes the prompt in one or two compute-bound steps (low TTFT), but every decode running alongside
    waits for those long steps (high TPOT). So p99 TPOT rises and p99 TTFT falls with the chunk; above the ridge
    the prompt's compute time no longer depends on the chunk, so the test's sizes straddle it."""
    reqs = poisson_requests(16, rate=4, prompt_len=3000, output_len=24, length_dist="fixed", seed=6)
    rows = chunk_sweep(reqs, [64, 256, 2048], 0.5, 0.05, num_blocks=4000)
    ttft, tpot = [r["ttft_p99_s"] for r in rows], [r["tpot_p99_s"] for r in rows]
    assert [r["max_num_batched_tokens"] for r in rows] == [64, 256, 2048]
    assert ttft[0] > ttft[1] > ttft[2] and tpot[0] < tpot[1] < tpot[2]
    assert not rows[0]["meets_p99"] and rows[2]["meets_p99"]
    assert all(set(r) == {"max_num_batched_tokens", "ttft_p99_s", "tpot_p99_s", "goodput_requests_per_s",
                          "sla_attainment", "meets_p99"} for r in rows)
    with pytest.raises(ValueError, match="chunks"):
        chunk_sweep(reqs, [], 0.5, 0.05)


# ---- the CLI ---------------------------------------------------------------------------------------------------
def test_cli_prints_goodput_and_attainment(capsys):
    argv = ["--blocks", "400", "--rate", "20", "--seconds", "1", "--sla-ttft", "500ms", "--sla-tpot", "50ms"]
    assert main(argv) == 0
    assert "goodput" in capsys.readouterr().out
    assert main(argv + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert SLA_KEYS <= set(data) and data["sla_ttft_s"] == 0.5 and data["sla_tpot_s"] == 0.05
    assert main(argv[:6] + ["--json"]) == 0
    assert not SLA_KEYS & set(json.loads(capsys.readouterr().out))


def test_cli_find_rate_lists_its_runs_and_the_bracket(capsys):
    argv = ["--blocks", "200", "--rate", "10", "--seconds", "3", "--output-len", "8", "--max-num-seqs", "4",
            "--prompt-len", "64", "--sla-ttft", "50ms", "--sla-tpot", "20ms", "--find-rate"]
    assert main(argv + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    low, high = data["bracket_per_s"]
    assert data["rate_per_s"] == low and high / low <= 1.02 and data["converged"] and 1 < len(data["runs"]) <= 24
    assert data["runs"][0]["rate"] == 10
    assert {"rate", "meets", "ttft_p99_s", "tpot_p99_s", "why"} <= set(data["runs"][0])
    assert main(argv[:5] + ["1"] + argv[6:]) == 0  # the text of a shorter search
    out = capsys.readouterr().out
    assert "highest rate meeting the SLA" in out and out.count("meets") >= 2 and "misses: p99" in out


@pytest.mark.parametrize("argv, says", [
    (["--find-rate"], "--sla-ttft and --sla-tpot"), (["--find-rate", "--sla-ttft", "1s"], "--sla-tpot"),
    (["--sla-ttft", "0"], "--sla-ttft"), (["--sla-tpot", "2h"], "--sla-tpot"), (["--sla-ttft", "1ns"], "--sla-ttft"),
    (["--sla-tpot", "fast"], "--sla-tpot"), (["--sla-ttft", "nan"], "--sla-ttft"),
])
def test_cli_sla_errors_exit_2_with_one_line(argv, says, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and says in err and err.count("\n") == 1
