"""``ringlab serve-sim``: serve a seeded Poisson trace with the paged-KV continuous-batching scheduler.

Example: ``ringlab serve-sim --model llama-2-7b --hardware h100-sxm --blocks 2000 --block-size 16
--rate 10 --seconds 100`` (about 1,000 requests). Prints TTFT, TPOT, queueing delay, throughput,
preemptions, prefix-cache hits and copy-on-write copies; ``--json`` prints the same as JSON. The
models are in :mod:`ringlab.serving` (allocator, scheduler) and :mod:`ringlab.calc` (step times).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict

from ringlab import cli_args
from ringlab.calc import HARDWARE, MODELS, canonical_dtype, get_model, max_cached_tokens
from ringlab.serving import SchedulerConfig, poisson_requests
from ringlab.serving.blocks import MAX_BLOCKS
from ringlab.serving.requests import LENGTHS
from ringlab.serving.scheduler import PREEMPTION_MODES, Scheduler

PROG = "ringlab serve-sim"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        self.exit(2, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("--model", type=cli_args.name_or_path, default="llama-2-7b", help=f"model preset ({', '.join(MODELS)}) or config.json path")
    p.add_argument("--hardware", default="h100-sxm", choices=list(HARDWARE), metavar="H",
                   help=f"GPU preset: {', '.join(HARDWARE)} (default h100-sxm)")
    p.add_argument("--blocks", type=cli_args.integer(min=1), help="KV blocks in the pool (default: what fits next to the weights "
                                              "at gpu_memory_utilization 0.9)")
    p.add_argument("--block-size", type=cli_args.integer(min=1, max=10**5), default=16, help="tokens per block (default 16)")
    p.add_argument("--rate", type=cli_args.real(min=0, min_open=True), default=10.0, help="mean arrivals per second (default 10)")
    p.add_argument("--seconds", type=cli_args.duration(max=86400.0), default=100.0, help="arrivals during this many seconds (default 100)")
    p.add_argument("--prompt-len", type=cli_args.integer(min=1), default=256, help="mean prompt tokens (default 256)")
    p.add_argument("--output-len", type=cli_args.integer(min=1), default=128, help="mean output tokens per sample (default 128)")
    p.add_argument("--length-dist", default="uniform", choices=LENGTHS, help="length distribution (default uniform)")
    p.add_argument("--shared-prefix", type=cli_args.integer(min=0, max=10**7), default=0, help="tokens of a system prompt shared by all (default 0)")
    p.add_argument("--n", type=cli_args.integer(min=1, max=1024), default=1, help="samples per request (parallel sampling, default 1)")
    p.add_argument("--max-num-batched-tokens", type=cli_args.integer(min=1, max=10**8), default=2048, help="token budget per step (default 2048)")
    p.add_argument("--max-num-seqs", type=cli_args.integer(min=1, max=10**6), default=256, help="sequences per step (default 256)")
    p.add_argument("--chunked-prefill", action="store_true", help="split prompts over steps")
    p.add_argument("--preemption", default="recompute", choices=PREEMPTION_MODES, help="default recompute")
    p.add_argument("--policy", default="fixed", choices=("fixed", "naive"),
                   help="fixed: reserve decode room, preempt the newest (default); naive: the livelocking one")
    p.add_argument("--watermark", type=cli_args.real(min=0, max=1), help="fraction of blocks admission leaves free (default 0.01, naive 0)")
    p.add_argument("--no-prefix-caching", action="store_true", help="turn prefix caching off")
    p.add_argument("--dtype", type=cli_args.text(), default="bf16", help="weights and KV cache dtype (default bf16)")
    p.add_argument("--seed", type=cli_args.integer(min=0, max=2**63 - 1), default=0, help="trace seed (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    return p


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
        if blocks is None:
            tokens = max_cached_tokens(args.model, args.hardware, args.dtype)
            blocks = tokens // args.block_size
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
    if args.json:
        print(cli_args.json_text({"model": scheduler.cost.model.name, "hardware": scheduler.cost.hardware.name,
                          "blocks": blocks, "block_size": args.block_size, "block_bytes": scheduler.block_bytes,
                          "policy": args.policy, "config": asdict(config),
                          **trace.metrics()}))
        return 0
    print(f"{scheduler.cost.model.name} on {scheduler.cost.hardware.name}: {blocks:,} blocks of {args.block_size} "
          f"tokens ({scheduler.block_bytes:,} B each), policy {args.policy}, {args.preemption} preemption, "
          f"rate {args.rate:g}/s for {args.seconds:g} s")
    print(trace.summary())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
