"""``ringlab plan serve``: the cheapest serving configuration (GPUs) that meets a TTFT / TPOT SLA.

    ringlab plan serve --model llama-3-8b --hardware h100-sxm --rate 20 --sla-ttft 500ms --sla-tpot 50ms
    ringlab plan serve --model llama-3-8b --trace requests.csv --sla-ttft 1s --sla-tpot 40ms --json

The search is :func:`ringlab.plan.serve.plan_serve` (its docstring says what is assumed).
"""

from __future__ import annotations

from ringlab import cli_args
from ringlab.calc import HARDWARE
from ringlab.commands.calc import emit, fail
from ringlab.plan.serve import plan_serve, read_trace
from ringlab.serving import poisson_requests


def _parser() -> cli_args.ArgumentParser:
    p = cli_args.ArgumentParser(prog="ringlab plan serve",
                                description="The cheapest configuration in GPUs (TP degree, replicas, batch limit, KV "
                                            "blocks, chunked prefill) whose p99 TTFT and TPOT meet the SLA, and the "
                                            "runner-up, from ringlab serve-sim's scheduler.")
    p.add_argument("--model", type=cli_args.name_or_path, required=True, help="preset name or path to a HF config.json")
    p.add_argument("--hardware", type=cli_args.text(), default="h100-sxm",
                   help=f"GPU preset: {', '.join(HARDWARE)} (default h100-sxm)")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--rate", type=cli_args.real(min=1e-3, max=1e4), help="mean arrivals per second (Poisson)")
    load.add_argument("--trace", type=cli_args.name_or_path,
                      help="CSV file with the header arrival_s,prompt_tokens,output_tokens")
    p.add_argument("--seconds", type=cli_args.duration(max=300.0), default=None,
                   help="with --rate: arrivals during this many seconds, at most 300 (default 30); the search "
                        "takes at most 1,000 requests")
    p.add_argument("--prompt-len", type=cli_args.integer(min=1, max=10**6), default=None,
                   help="with --rate: mean prompt tokens (default 256)")
    p.add_argument("--output-len", type=cli_args.integer(min=1, max=10**6), default=None,
                   help="with --rate: mean output tokens (default 128)")
    p.add_argument("--sla-ttft", type=cli_args.duration(max=3600.0), required=True, help="p99 time to first token, e.g. 500ms")
    p.add_argument("--sla-tpot", type=cli_args.duration(max=3600.0), required=True, help="p99 time per output token, e.g. 50ms")
    p.add_argument("--seed", type=cli_args.integer(min=0, max=2**63 - 1), default=None,
                   help="with --rate: trace seed (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def _result(r) -> dict | None:
    if r is None:
        return None
    c, m = r.config, r.metrics
    return {"gpus": c.gpus, "tp": c.tp, "replicas": c.replicas, "max_num_seqs": c.max_num_seqs,
            "chunked_prefill": c.chunk is not None, "max_num_batched_tokens": c.chunk, "kv_blocks": c.blocks,
            "block_size": 16, "colocated": True, "ttft_p99_s": m["ttft_p99_s"], "tpot_p99_s": m["tpot_p99_s"],
            "throughput_tokens_per_s": m["throughput_tokens_per_s"], "describe": c.describe()}


def serve_main(argv: list[str]) -> int:
    p = _parser()
    a = p.parse_args(argv)
    try:
        if a.trace is not None:
            given = [f"--{name.replace('_', '-')}" for name in ("seconds", "prompt_len", "output_len", "seed")
                     if getattr(a, name) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} shape(s) the Poisson trace of --rate; --trace reads its requests "
                                 "from the file")
            try:
                requests = read_trace(a.trace)
            except (ValueError, OSError) as e:
                raise ValueError(f"--trace {a.trace}: {getattr(e, 'strerror', None) or e}") from None
        else:
            requests = poisson_requests(rate=a.rate, seconds=30.0 if a.seconds is None else a.seconds,
                                        prompt_len=a.prompt_len or 256, output_len=a.output_len or 128,
                                        seed=a.seed or 0)
        plan = plan_serve(a.model, a.hardware, requests, a.sla_ttft, a.sla_tpot)
    except (ValueError, TypeError, OSError) as e:
        return fail(p.prog, e)
    data = {"model": a.model, "hardware": a.hardware, "requests": len(requests), "sla_ttft_s": a.sla_ttft,
            "sla_tpot_s": a.sla_tpot, "best": _result(plan.best), "runner_up": _result(plan.runner_up),
            "simulations": plan.simulations, "disaggregated": "not modelled", "notes": plan.notes}
    lines = [f"{a.model} on {a.hardware}: {len(requests):,} requests, SLA p99 TTFT <= {a.sla_ttft * 1e3:g} ms, "
             f"p99 TPOT <= {a.sla_tpot * 1e3:g} ms ({plan.simulations} scheduler runs)"]
    for label, r in (("cheapest", plan.best), ("runner-up", plan.runner_up)):
        if r is None:
            lines.append(f"  {label}: none meets the SLA within the search (TP 1-8, up to 64 replicas)")
            continue
        m = r.metrics
        lines.append(f"  {label}: {r.config.describe()}")
        lines.append(f"    p99 TTFT {m['ttft_p99_s'] * 1e3:.1f} ms, p99 TPOT "
                     f"{(m['tpot_p99_s'] or 0) * 1e3:.1f} ms per replica")
    lines += [f"  note: {n}" for n in plan.notes]
    return emit(data, "\n".join(lines), a.json)
