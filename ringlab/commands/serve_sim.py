"""``ringlab serve-sim``: serve a seeded Poisson trace with the paged-KV continuous-batching scheduler.

Example: ``ringlab serve-sim --model llama-2-7b --hardware h100-sxm --blocks 2000 --block-size 16
--rate 10 --seconds 100`` (about 1,000 requests). Prints TTFT, TPOT, queueing delay, throughput,
preemptions, prefix-cache hits and copy-on-write copies; ``--json`` prints the same as JSON. The
models are in :mod:`ringlab.serving` (allocator, scheduler) and :mod:`ringlab.calc` (step times).
A block is ``--block-size`` tokens of the layers that keep every token; a sequence's windowed layers and
Mamba state take further blocks of the same pool, as ``ringlab calc kv`` counts them.

Exit codes: 0 every request was simulated to its end (finished or rejected, or a livelock was found);
2 a usage error; 3 the run stopped at its step cap (1,000,000 steps) before serving every request:
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
from ringlab.serving.blocks import MAX_BLOCKS, block_bytes, pool_blocks
from ringlab.serving.requests import LENGTHS
from ringlab.serving.scheduler import MAX_BATCHED_TOKENS, PREEMPTION_MODES, Scheduler

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
    p.add_argument("--max-num-seqs", type=cli_args.integer(min=1, max=10**6), default=256, help="sequences per step (default 256)")
    p.add_argument("--chunked-prefill", action="store_true", help="split prompts over steps")
    p.add_argument("--preemption", default="recompute", choices=PREEMPTION_MODES, help="default recompute")
    p.add_argument("--policy", default="fixed", choices=("fixed", "naive"),
                   help="fixed: reserve decode room, preempt the newest (default); naive: the livelocking one")
    p.add_argument("--watermark", type=cli_args.real(min=0, max=1), help="fraction of blocks admission leaves free (default 0.01, naive 0)")
    p.add_argument("--no-prefix-caching", action="store_true",
                   help="turn prefix caching off (it finds hits when prompts share a --shared-prefix)")
    p.add_argument("--dtype", type=cli_args.text(), default="bf16", help="weights and KV cache dtype (default bf16)")
    p.add_argument("--seed", type=cli_args.integer(min=0, max=2**63 - 1), default=0, help="trace seed (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    return p


TRUNCATED = 3  # exit status of a run cut at its step cap


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


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _positive(parser, args, ["blocks", "block-size", "rate", "seconds", "prompt-len", "output-len", "n",
                             "max-num-batched-tokens", "max-num-seqs"])
    if args.blocks is not None and args.blocks > MAX_BLOCKS:
        parser.error(f"--blocks must be at most {MAX_BLOCKS:,} (a larger pool is a unit mistake), got {args.blocks:,}")
    if args.shared_prefix < 0:
        parser.error(f"--shared-prefix must be >= 0, got {args.shared_prefix}")
    if args.watermark is not None and not 0 <= args.watermark < 1:
        parser.error(f"--watermark must be a fraction in [0, 1), got {args.watermark}")
    for option, check in (("--model", get_model), ("--dtype", canonical_dtype)):
        try:
            check(getattr(args, option[2:]))
        except (ValueError, TypeError, OSError) as exc:
            parser.error(f"{option}: {exc}")
    try:
        settings = dict(max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs,
                        chunked_prefill=args.chunked_prefill, preemption=args.preemption)
        if args.watermark is not None:
            settings["watermark"] = args.watermark
        config = SchedulerConfig.naive(**settings) if args.policy == "naive" else SchedulerConfig(**settings)
        blocks = args.blocks
        if blocks is not None:
            _check_pool(args)
        if blocks is None:  # the KV memory next to the weights, in blocks of the layers that keep every token
            tokens = max_cached_tokens(args.model, args.hardware, args.dtype)
            blocks = pool_blocks(tokens * kv_cache_bytes_per_token(args.model, args.dtype), args.model,
                                 args.block_size, args.dtype) if tokens else 0
            if blocks == 0:
                raise ValueError(f"the memory {args.model} leaves on {args.hardware} holds {tokens:,} tokens of KV, "
                                 f"not one block of {args.block_size}: pass --blocks or a smaller --block-size")
        requests = poisson_requests(rate=args.rate, seconds=args.seconds, prompt_len=args.prompt_len,
                                    output_len=args.output_len, length_dist=args.length_dist,
                                    shared_prefix_len=args.shared_prefix, n=args.n, seed=args.seed)
    except (ValueError, TypeError) as exc:
        parser.exit(2, f"{PROG}: error: {exc}\n")
    try:
        scheduler = Scheduler(args.model, args.hardware, blocks, args.block_size, config,
                              enable_prefix_caching=not args.no_prefix_caching, dtype=args.dtype)
    except (ValueError, TypeError) as exc:  # e.g. a chip without that dtype's peak
        parser.exit(2, f"{PROG}: error: --hardware {args.hardware} with --dtype {args.dtype}: {exc}\n")
    trace = scheduler.run(requests)
    code = TRUNCATED if trace.truncated else 0
    if trace.truncated:
        print(f"{PROG}: warning: {trace.truncated} (exit status {TRUNCATED})", file=sys.stderr)
    if args.json:
        print(cli_args.json_text({"model": scheduler.cost.model.name, "hardware": scheduler.cost.hardware.name,
                          "blocks": blocks, "block_size": args.block_size, "block_bytes": scheduler.block_bytes,
                          "policy": args.policy, "config": asdict(config),
                          **trace.metrics()}))
        return code
    print(textfmt.wrap(f"{scheduler.cost.model.name} on {scheduler.cost.hardware.name}: {blocks:,} blocks of "
                       f"{args.block_size} tokens ({format_size(scheduler.block_bytes, binary=True)} each), policy "
                       f"{args.policy}, {args.preemption} preemption, rate {args.rate:g}/s for {args.seconds:g} s"))
    print(textfmt.wrap_lines(trace.summary()))
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
