"""``ringlab serve-sim``: serve a seeded Poisson trace with the paged-KV continuous-batching scheduler.

Example: ``ringlab serve-sim --model llama-2-7b --hardware h100-sxm --blocks 2000 --block-size 16
--rate 10 --seconds 100`` (about 1,000 requests). Prints TTFT, TPOT, queueing delay, throughput,
preemptions, prefix-cache hits and copy-on-write copies; ``--json`` prints the same as JSON. The
models are in :mod:`ringlab.serving` (allocator, scheduler) and :mod:`ringlab.calc` (step times).
A block is ``--block-size`` tokens of the layers that keep every token; a sequence's windowed layers and
Mamba state take further blocks of the same pool, as ``ringlab calc kv`` counts them.

With ``--sla-ttft 500ms --sla-tpot 50ms`` it also prints goodput (requests per second that finished
within both limits) and each limit's attainment (:meth:`ringlab.serving.Trace.metrics`). ``--find-rate``
searches for the highest arrival rate whose p99 TTFT and p99 TPOT meet both limits, replaying the
requests (the ``--rate`` trace or ``--trace``) faster or slower (:func:`ringlab.serving.goodput.find_rate`),
and prints every run tried.

``--split P:D`` serves the requests disaggregated, P prefill and D decode instances of ``--tp`` GPUs on
``--topology`` (``--nodes`` nodes), each prompt's KV cache sent over NVLink or the network, next to colocated
serving on the same GPUs; ``--best-split`` (with both SLAs) searches every split's goodput
(:mod:`ringlab.serving.disagg`, printed by :mod:`ringlab.commands.serve_split`).

``--trace FILE`` replays a production trace instead of the Poisson one (its arrivals, lengths and, for
Mooncake's, shared prefix blocks; :mod:`ringlab.serving.traces`): an Azure LLM inference CSV, a Mooncake
JSONL, or a bundled excerpt by name (``azure-conv``, ``azure-code``, ``mooncake-conv``); ``--trace-limit N``
replays its first N requests.

Exit codes: 0 every request was simulated to its end (finished or rejected, or a livelock was found);
2 a usage error; 3 the run stopped at its step cap before serving every request (the tokens the requests
ask for plus 1,000,000 steps, which a run without preemptions never reaches):
the numbers describe a partial run, the JSON says ``"truncated": true`` with the reason, and a
warning goes to stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict

from ringlab import cli_args, textfmt
from ringlab.calc import (HARDWARE, MODELS, canonical_dtype, get_hardware, get_model, kv_cache_bytes_per_token,
                          max_cached_tokens)
from ringlab.calc.units import format_size
from ringlab.serving import SchedulerConfig, poisson_requests
from ringlab.serving.blocks import MAX_BLOCKS, POLICIES, block_bytes, pool_blocks
from ringlab.serving.goodput import find_rate, time_scaled
from ringlab.serving.requests import LENGTHS
from ringlab.serving.scheduler import MAX_BATCHED_TOKENS, PREEMPTION_MODES, Scheduler
from ringlab.serving.traces import BUNDLED, FORMATS, load_trace, trace_path, trace_requests
from ringlab.serving.trace import SLA_RANGE_S
from ringlab.topology.presets import PRESETS

from . import serve_split

PROG = "ringlab serve-sim"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        self.exit(2, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__.splitlines()[0], formatter_class=cli_args.HelpFormatter)
    p.add_argument("--model", type=cli_args.name_or_path, default="llama-2-7b", help=f"model preset ({', '.join(MODELS)}) or config.json path")
    p.add_argument("--hardware", default="h100-sxm", choices=list(HARDWARE), metavar="H",
                   help=f"GPU preset: {', '.join(HARDWARE)} (default h100-sxm)")
    p.add_argument("--blocks", type=cli_args.integer(min=1), help="KV blocks in the pool (default: what fits next to the weights "
                                              "at gpu_memory_utilization 0.9)")
    p.add_argument("--block-size", type=cli_args.integer(min=1, max=10**5), default=16, help="tokens per block (default 16)")
    p.add_argument("--rate", type=cli_args.real(min=1e-3), default=10.0, help="mean arrivals per second (default 10)")
    p.add_argument("--seconds", type=cli_args.duration(max=86400.0), default=100.0, help="arrivals during this many seconds (default 100)")
    p.add_argument("--prompt-len", type=cli_args.integer(min=1), default=256, help="mean prompt tokens (default 256)")
    p.add_argument("--output-len", type=cli_args.integer(min=1), default=128, help="mean output tokens per sample (default 128)")
    p.add_argument("--length-dist", default="uniform", choices=LENGTHS, help="length distribution (default uniform)")
    p.add_argument("--shared-prefix", type=cli_args.integer(min=0, max=10**7), default=0, help="tokens of a system prompt shared by all (default 0)")
    p.add_argument("--n", type=cli_args.integer(min=1, max=1024), default=1, help="samples per request (parallel sampling, default 1)")
    p.add_argument("--max-num-batched-tokens", type=cli_args.integer(min=1, max=MAX_BATCHED_TOKENS), default=2048,
                   help=f"token budget per step, at most {MAX_BATCHED_TOKENS:,} (default 2048)")
    p.add_argument("--max-model-len", type=cli_args.integer(min=1, max=10**8), metavar="TOKENS",
                   help="longest prompt + output served; longer requests are rejected (default: the model's "
                        "max_position_embeddings)")
    p.add_argument("--max-num-seqs", type=cli_args.integer(min=1, max=10**6), default=256, help="sequences per step (default 256)")
    p.add_argument("--chunked-prefill", action="store_true", help="split prompts over steps")
    p.add_argument("--preemption", default="recompute", choices=PREEMPTION_MODES, help="default recompute")
    p.add_argument("--policy", default="fixed", choices=("fixed", "naive"),
                   help="fixed: reserve decode room, preempt the newest (default); naive: the livelocking one")
    p.add_argument("--watermark", type=cli_args.real(min=0, max=1), help="fraction of blocks admission leaves free (default 0.01, naive 0)")
    p.add_argument("--prefix-policy", default="uncached-first", choices=POLICIES,
                   help="which free block is recycled first: uncached-first (the default) or vllm-v1, vLLM v1's one "
                        "LRU queue")
    p.add_argument("--no-prefix-caching", action="store_true",
                   help="turn prefix caching off (it finds hits when prompts share a --shared-prefix)")
    p.add_argument("--dtype", type=cli_args.text(), default="bf16", help="weights and KV cache dtype (default bf16)")
    p.add_argument("--seed", type=cli_args.integer(min=0, max=2**63 - 1), default=0, help="trace seed (default 0)")
    p.add_argument("--trace", type=cli_args.text(), metavar="FILE",
                   help="replay a production trace instead of a Poisson one: an Azure LLM inference CSV, a Mooncake "
                        f"JSONL, or a bundled excerpt: {', '.join(BUNDLED)} (excludes {', '.join(POISSON_OPTIONS)})")
    p.add_argument("--trace-format", choices=FORMATS, help="the --trace file's format (default: told from its first line)")
    p.add_argument("--trace-limit", type=cli_args.integer(min=1), metavar="N", help="replay the first N requests of --trace")
    sla = cli_args.duration(min=SLA_RANGE_S[0], max=SLA_RANGE_S[1], min_open=False)
    p.add_argument("--sla-ttft", type=sla, help="time to first token limit, e.g. 500ms (1us..1h): print goodput and attainment")
    p.add_argument("--sla-tpot", type=sla, help="time per output token limit, e.g. 50ms (1us..1h)")
    p.add_argument("--find-rate", action="store_true",
                   help="search the highest rate whose p99 TTFT and p99 TPOT meet both SLAs (the requests "
                        f"replayed faster or slower, from their rate; bisection to {FIND_RATE_RESOLUTION * 100:g}%%, "
                        f"at most {FIND_RATE_MAX_RUNS} runs)")
    p.add_argument("--tp", type=cli_args.integer(min=1, max=1024), default=1,
                   help="tensor-parallel GPUs per instance: step times, and the default pool per GPU (default 1)")
    p.add_argument("--split", type=_split, metavar="P:D",
                   help="disaggregated: P prefill and D decode instances of --tp GPUs, against colocated serving on "
                        "the same GPUs")
    p.add_argument("--best-split", action="store_true",
                   help="the goodput (highest rate meeting both SLAs) of every P:D split and of colocated serving")
    p.add_argument("--topology", default="dgx-h100", choices=list(PRESETS), metavar="NAME",
                   help=f"where --split instances sit, for the KV transfers: {', '.join(PRESETS)} (default dgx-h100)")
    p.add_argument("--nodes", type=cli_args.integer(min=1, max=4096), default=1, help="nodes of --topology (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    return p


def _split(text: str) -> tuple[int, int]:
    """``P:D``, two ints >= 1 (argparse type)."""
    first, colon, second = text.partition(":")
    if not (colon and first.isdigit() and second.isdigit() and int(first) >= 1 and int(second) >= 1):
        raise argparse.ArgumentTypeError(f"expected P:D, prefill and decode instances as ints >= 1 (e.g. 2:6), "
                                         f"got {text!r}")
    return int(first), int(second)


TRUNCATED = 3  # exit status of a run cut at its step cap
POISSON_OPTIONS = ("--rate", "--seconds", "--prompt-len", "--output-len", "--length-dist", "--shared-prefix", "--seed")
FIND_RATE_RESOLUTION = 0.02  # the bracket's high / low - 1 when the search stops
FIND_RATE_MAX_RUNS = 24  # scheduler runs: doubling over 2^10 in rate, then bisecting a factor 2 to 2%


def _check_pool(args) -> None:
    """ValueError when ``--blocks`` of KV cache do not fit the GPU's memory next to the weights (both named)."""
    model, hw = get_model(args.model), get_hardware(args.hardware)
    pool = args.blocks * block_bytes(model, args.block_size, args.dtype)
    weights = model.weight_bytes(args.dtype)
    free = hw.memory - weights
    if pool > free:
        raise ValueError(f"--blocks {args.blocks:,} of {args.block_size} tokens hold {format_size(pool)} of KV cache, "
                         f"but {hw.name} has {format_size(hw.memory)} and the {args.dtype} weights of {model.name} take "
                         f"{format_size(weights)}, leaving {format_size(max(free, 0))}; at most "
                         f"{max(free, 0) // block_bytes(model, args.block_size, args.dtype):,} blocks fit")


def _positive(parser, args, names):
    for name in names:
        value = getattr(args, name.replace("-", "_"))
        if value is not None and not 0 < value < math.inf:
            parser.error(f"--{name} must be a finite number > 0, got {value}")


def _check_partner_options(parser, args, argv) -> None:
    """One-line errors for an option given without the one it belongs to: ``--trace`` with a Poisson option,
    ``--trace-format`` / ``--trace-limit`` without it, ``--topology`` / ``--nodes`` without ``--split`` or
    ``--best-split``."""
    quiet = build_parser()  # the same options with no defaults: what argv names explicitly
    for action in quiet._actions:
        action.default = argparse.SUPPRESS
    given = {"--" + dest.replace("_", "-") for dest in vars(quiet.parse_args(argv))}
    placed = sorted(given & {"--topology", "--nodes"})
    if placed and not (args.split or args.best_split):
        verb = "apply" if len(placed) > 1 else "applies"
        parser.error(f"{' and '.join(placed)} only {verb} to --split P:D or --best-split, whose instances they place")
    if args.trace is None:
        if given & {"--trace-format", "--trace-limit"}:
            parser.error("--trace-format and --trace-limit need --trace FILE")
        return
    clash = [option for option in POISSON_OPTIONS if option in given]
    if clash:
        parser.error(f"--trace replays the file's arrivals and lengths, so {', '.join(clash)} (Poisson trace options) "
                     "cannot be used with it")


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_partner_options(parser, args, argv)
    _positive(parser, args, ["blocks", "block-size", "rate", "seconds", "prompt-len", "output-len", "n",
                             "max-num-batched-tokens", "max-num-seqs"])
    if args.blocks is not None and args.blocks > MAX_BLOCKS:
        parser.error(f"--blocks must be at most {MAX_BLOCKS:,} (a larger pool is a unit mistake), got {args.blocks:,}")
    if args.shared_prefix < 0:
        parser.error(f"--shared-prefix must be >= 0, got {args.shared_prefix}")
    if args.watermark is not None and not 0 <= args.watermark < 1:
        parser.error(f"--watermark must be a fraction in [0, 1), got {args.watermark}")
    for option, wanted in (("--find-rate", args.find_rate), ("--best-split", args.best_split)):
        if wanted and (args.sla_ttft is None or args.sla_tpot is None):
            parser.error(f"{option} needs both --sla-ttft and --sla-tpot (e.g. --sla-ttft 500ms --sla-tpot 50ms)")
    chosen = [o for o, on in (("--find-rate", args.find_rate), ("--split", args.split), ("--best-split", args.best_split))
              if on]
    if len(chosen) > 1:
        parser.error(f"{' and '.join(chosen)} cannot be combined: choose one")
    for option, check in (("--model", get_model), ("--dtype", canonical_dtype)):
        try:
            check(getattr(args, option[2:]))
        except (ValueError, TypeError, OSError) as exc:
            parser.error(f"{option}: {exc}")
    try:
        settings = dict(max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs,
                        chunked_prefill=args.chunked_prefill, preemption=args.preemption,
                        prefix_policy=args.prefix_policy, max_model_len=args.max_model_len)
        if args.watermark is not None:
            settings["watermark"] = args.watermark
        config = SchedulerConfig.naive(**settings) if args.policy == "naive" else SchedulerConfig(**settings)
        blocks = args.blocks
        if blocks is not None:
            _check_pool(args)
        if blocks is None:  # the KV memory next to the weights, in blocks of the layers that keep every token
            tokens = max_cached_tokens(args.model, args.hardware, args.dtype, tp=args.tp)
            blocks = pool_blocks(tokens * kv_cache_bytes_per_token(args.model, args.dtype, args.tp), args.model,
                                 args.block_size, args.dtype, args.tp) if tokens else 0
            if blocks == 0:
                raise ValueError(f"the memory {args.model} leaves on {args.hardware} holds {tokens:,} tokens of KV, "
                                 f"not one block of {args.block_size}: pass --blocks or a smaller --block-size")
        if args.trace is not None:
            try:
                records = load_trace(trace_path(args.trace), args.trace_format, args.trace_limit)
            except OSError as exc:
                raise ValueError(f"--trace {args.trace}: {exc.strerror or exc}") from None
            requests = trace_requests(records, n=args.n)
            if records[-1].arrival_s > 0:  # the trace's mean rate stands for --rate (--find-rate scales from it)
                args.rate = (len(records) - 1) / records[-1].arrival_s
        else:
            requests = poisson_requests(rate=args.rate, seconds=args.seconds, prompt_len=args.prompt_len,
                                        output_len=args.output_len, length_dist=args.length_dist,
                                        shared_prefix_len=args.shared_prefix, n=args.n, seed=args.seed)
    except (ValueError, TypeError) as exc:
        parser.exit(2, f"{PROG}: error: {exc}\n")
    try:
        scheduler = Scheduler(args.model, args.hardware, blocks, args.block_size, config,
                              enable_prefix_caching=not args.no_prefix_caching, dtype=args.dtype, tp=args.tp)
    except (ValueError, TypeError) as exc:  # e.g. a chip without that dtype's peak
        parser.exit(2, f"{PROG}: error: --hardware {args.hardware} with --dtype {args.dtype}: {exc}\n")
    if args.find_rate:
        return _find_rate(args, scheduler, blocks, config, requests)
    if args.split or args.best_split:
        try:
            return serve_split.main(args, scheduler, blocks, config, requests)
        except ValueError as exc:
            parser.exit(2, f"{PROG}: error: {exc}\n")
    trace = scheduler.run(requests)
    code = TRUNCATED if trace.truncated else 0
    if trace.truncated:
        print(f"{PROG}: warning: {trace.truncated} (exit status {TRUNCATED})", file=sys.stderr)
    if args.json:
        print(cli_args.json_text({"model": scheduler.cost.model.name, "hardware": scheduler.cost.hardware.name,
                          "blocks": blocks, "block_size": args.block_size, "block_bytes": scheduler.block_bytes,
                          "policy": args.policy, "config": asdict(config),
                          **trace.metrics(args.sla_ttft, args.sla_tpot)}))
        return code
    print(textfmt.wrap(f"{scheduler.cost.model.name} on {scheduler.cost.hardware.name}: {blocks:,} blocks of "
                       f"{args.block_size} tokens ({format_size(scheduler.block_bytes, binary=True)} each), policy "
                       f"{args.policy}, {args.preemption} preemption, "
                       + (f"trace {args.trace} ({len(requests):,} requests, {args.rate:.3g}/s on average)" if args.trace
                          else f"rate {args.rate:g}/s for {args.seconds:g} s")))
    print(textfmt.wrap_lines(trace.summary(args.sla_ttft, args.sla_tpot)))
    return code


def _find_rate(args, scheduler, blocks, config, requests) -> int:
    """``--find-rate``: the search of :func:`ringlab.serving.goodput.find_rate` on ``requests`` time-scaled from
    ``args.rate`` (the Poisson rate, or a trace's mean rate), each run on a fresh scheduler of the same settings;
    prints the runs and the answer."""
    def run(reqs):
        return Scheduler(args.model, args.hardware, blocks, args.block_size, config,
                         enable_prefix_caching=not args.no_prefix_caching, dtype=args.dtype, tp=args.tp).run(reqs)

    search = find_rate(time_scaled(requests, args.rate), run, args.sla_ttft, args.sla_tpot, start_rate=args.rate,
                       resolution=FIND_RATE_RESOLUTION, max_runs=FIND_RATE_MAX_RUNS)
    name, hw = scheduler.cost.model.name, scheduler.cost.hardware.name
    if args.json:
        print(cli_args.json_text({
            "model": name, "hardware": hw, "blocks": blocks, "block_size": args.block_size,
            "block_bytes": scheduler.block_bytes, "policy": args.policy, "config": asdict(config),
            "requests": len(requests), "sla_ttft_s": args.sla_ttft, "sla_tpot_s": args.sla_tpot,
            "criterion": "p99 TTFT and p99 TPOT within the SLAs, every request finished",
            "rate_per_s": search.rate, "bracket_per_s": list(search.bracket), "converged": search.converged,
            "resolution": search.resolution, "note": search.note, "runs": [asdict(r) for r in search.runs]}))
        return 0

    def ms(value):
        return "-" if value is None else f"{value * 1e3:,.1f}"

    print(textfmt.wrap(f"{name} on {hw}: {blocks:,} blocks of {args.block_size} tokens, policy {args.policy}; "
                       f"the {len(requests):,} requests of "
                       + (f"trace {args.trace} ({args.rate:.3g}/s on average)" if args.trace else f"the {args.rate:g}/s trace")
                       + " replayed at other rates; "
                       f"SLA p99 TTFT <= {args.sla_ttft * 1e3:g} ms and p99 TPOT <= {args.sla_tpot * 1e3:g} ms"))
    print(f"{'rate/s':>10} {'p99 TTFT ms':>12} {'p99 TPOT ms':>12} {'goodput/s':>10}  result")
    for r in search.runs:
        goodput = "-" if r.goodput is None else f"{r.goodput:,.2f}"
        print(f"{r.rate:>10,.2f} {ms(r.ttft_p99_s):>12} {ms(r.tpot_p99_s):>12} {goodput:>10}  "
              + ("meets" if r.meets else f"misses: {r.why}"))
    low, high = search.bracket
    answer = ("no rate tried meets the SLA" if low is None else f"highest rate meeting the SLA: {low:,.2f}/s"
              + ("" if high is None else f" (fails at {high:,.2f}/s, {high / low - 1:.1%} above)"))
    print(textfmt.wrap(f"{answer}; {len(search.runs)} run{'' if len(search.runs) == 1 else 's'}"))
    if search.note:
        print(textfmt.wrap(f"note: {search.note}"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
