"""plan_serve: the cheapest configuration meeting the SLA, from the serving scheduler's own runs."""

import pytest

from ringlab.plan.serve import plan_serve, read_trace
from ringlab.serving import Request, Scheduler, SchedulerConfig, poisson_requests


@pytest.fixture(scope="module")
def light():
    requests = poisson_requests(rate=2.0, seconds=10.0, prompt_len=256, output_len=64, seed=0)
    return requests, plan_serve("llama-3-8b", "h100-sxm", requests, 0.5, 0.05)


def test_cheapest_meets_the_sla_and_is_no_dearer_than_the_runner_up(light):
    requests, plan = light
    assert plan.best is not None and plan.best.meets_sla
    m = plan.best.metrics
    assert m["ttft_p99_s"] <= 0.5 and m["tpot_p99_s"] <= 0.05 and m["finished"] > 0
    assert plan.best.config.gpus == min(r.config.gpus for r in plan.tried)
    assert plan.runner_up is None or plan.runner_up.config.gpus >= plan.best.config.gpus
    assert any("disaggregated" in note for note in plan.notes)


def test_the_cheapest_result_is_what_the_scheduler_measures(light):
    """Rerun the best configuration's first replica by hand with the scheduler and compare."""
    requests, plan = light
    c = plan.best.config
    config = SchedulerConfig(max_num_batched_tokens=c.chunk or 8192, max_num_seqs=c.max_num_seqs,
                             chunked_prefill=c.chunk is not None)
    trace = Scheduler("llama-3-8b", "h100-sxm", c.blocks, 16, config, tp=c.tp).run(sorted(
        requests, key=lambda r: r.arrival_s)[0::c.replicas])
    assert trace.metrics()["ttft_p99_s"] <= plan.best.metrics["ttft_p99_s"] + 1e-12


def test_tensor_parallelism_shortens_decode_steps():
    requests = poisson_requests(num_requests=8, rate=100.0, prompt_len=64, output_len=32, seed=1)
    tpot = [Scheduler("llama-3-8b", "h100-sxm", 4000, 16, tp=tp).run(requests).metrics()["tpot_p50_s"]
            for tp in (1, 2)]
    assert tpot[1] < tpot[0]


@pytest.mark.slow
def test_an_impossible_sla_has_no_configuration():
    requests = poisson_requests(rate=1.0, seconds=2.0, seed=0)
    plan = plan_serve("llama-3-8b", "h100-sxm", requests, 1e-6, 1e-6)
    assert plan.best is None and plan.runner_up is None


@pytest.mark.parametrize("text, word", [("", "header"), ("a,b,c\n", "header"),
                                        ("arrival_s,prompt_tokens,output_tokens\n", "no requests"),
                                        ("arrival_s,prompt_tokens,output_tokens\n0,10\n", "line 2"),
                                        ("arrival_s,prompt_tokens,output_tokens\n-1,10,10\n", "line 2")])
def test_bad_trace_files_name_the_line(tmp_path, text, word):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=word):
        read_trace(path)


def test_a_trace_file_is_read(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.5,100,20\n0.0,50,10\n")
    requests = read_trace(path)
    assert [(r.arrival_s, len(r.prompt), r.max_new_tokens) for r in requests] == [(0.5, 100, 20), (0.0, 50, 10)]
    assert not set(requests[0].prompt) & set(requests[1].prompt)  # no accidental shared prefix


def test_requests_longer_than_the_context_are_refused_before_any_run(capsys):
    """The scheduler rejects them at every configuration: the search would try them all and find none."""
    requests = [Request(0, 0.0, tuple(range(100)), 8), Request(1, 0.5, tuple(range(4000)), 97),
                Request(2, 1.0, tuple(range(4000)), 96)]  # 4,097 and 4,096 tokens against llama-2-7b's 4,096
    with pytest.raises(ValueError, match=r"requests: 1 of 3 are longer than llama-2-7b's context \(request 1: "
                                         r"prompt 4,000 \+ output 97 tokens exceed max_model_len, llama-2-7b's "
                                         r"max_position_embeddings=4,096\)"):
        plan_serve("llama-2-7b", "h100-sxm", requests, 0.5, 0.05)
    from ringlab.commands.plan_serve import serve_main

    assert serve_main(["--model", "llama-2-7b", "--rate", "2", "--seconds", "5", "--prompt-len", "4000", "--output-len",
                 "200", "--sla-ttft", "1s", "--sla-tpot", "50ms"]) == 2
    err = capsys.readouterr().err
    assert "longer than llama-2-7b's context" in err and err.count("\n") == 1
