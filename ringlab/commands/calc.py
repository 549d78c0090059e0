"""``ringlab calc <calculator> ...``: the capacity calculators of :mod:`ringlab.calc` on the command line.

    ringlab calc kv --model llama-2-70b --tokens 4096 --batch 32 --dtype fp16 [--tp N] [--block-size B] [--json]
    ringlab calc comm --strategy fsdp_full_shard --params 7e9 --world-size 64 [--dtype bf16] [--json]

To add a calculator (issue 7 adds roofline, decode, bubble): write a function ``main(argv: list[str])
-> int`` in your own module (e.g. ``ringlab/commands/calc_perf.py``) and add ONE line to
``SUBCOMMANDS`` below: ``"name": ("module", "function", "one-line summary")``. ``emit`` and
``fail`` here print results and errors the same way for every calculator.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from types import SimpleNamespace

# name -> (module, function taking argv and returning an exit code, one-line summary)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "kv": ("ringlab.commands.calc", "kv_main", "KV-cache bytes for a model, context, batch, dtype and TP degree"),
    "comm": ("ringlab.commands.calc", "comm_main", "per-rank gradient traffic and memory of DDP / ZeRO / FSDP"),
    "roofline": ("ringlab.commands.calc_perf", "roofline_main", "memory- or compute-bound? roofline time of a kernel"),
    "decode": ("ringlab.commands.calc_perf", "decode_main", "decode step time vs batch; largest batch under a latency SLA"),
    "bubble": ("ringlab.commands.calc_perf", "bubble_main", "pipeline bubble fraction and in-flight micro-batches"),
}


def emit(data: dict, text: str, as_json: bool) -> int:
    """Print ``data`` as JSON (``--json``) or ``text``; return exit code 0."""
    print(json.dumps(data, indent=2) if as_json else text)
    return 0


def fail(prog: str, error: Exception) -> int:
    """Print ``error`` the way argparse does and return exit code 2."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    return 2


def _sizes(n: int) -> dict:
    return {"bytes": n, "GB": n / 1e9, "GiB": n / 2**30}


def kv_main(argv: list[str]) -> int:
    from ringlab.calc import format_bytes, get_model, kv_cache_bytes, kv_cache_bytes_per_token, kv_heads_per_rank

    p = argparse.ArgumentParser(prog="ringlab calc kv", description="KV-cache memory on one GPU (GB = 1e9 B, GiB = 2**30 B).")
    p.add_argument("--model", required=True, help="preset name (e.g. llama-2-70b) or path to a HF config.json")
    p.add_argument("--tokens", type=int, required=True, help="tokens per sequence (context length)")
    p.add_argument("--batch", type=int, default=1, help="number of sequences (default 1)")
    p.add_argument("--dtype", default="fp16", help="cache dtype: fp32, fp16, bf16, fp8, int8 (default fp16)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree; bytes are per GPU (default 1)")
    p.add_argument("--block-size", type=int, default=None, help="paged-attention block size in tokens")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    try:
        model = get_model(args.model)
        per_token = kv_cache_bytes_per_token(model, args.dtype, args.tp)
        total = kv_cache_bytes(model, args.tokens, args.batch, args.dtype, args.tp, args.block_size)
        heads = None if model.uses_mla else kv_heads_per_rank(model, args.tp)
    except (ValueError, TypeError) as e:
        return fail(p.prog, e)
    data = {
        "model": model.name, "tokens": args.tokens, "batch_size": args.batch, "dtype": args.dtype, "tp": args.tp,
        "block_size": args.block_size, "num_hidden_layers": model.num_hidden_layers,
        "num_key_value_heads": model.num_key_value_heads, "kv_heads_per_rank": heads, "head_dim": model.head_dim,
        "mla": model.uses_mla, "sliding_window": model.sliding_window,
        "bytes_per_token": per_token, "total": _sizes(total),
    }
    layout = (f"MLA latent {model.kv_lora_rank} + rope {model.qk_rope_head_dim}" if model.uses_mla else
              f"{heads} KV heads/GPU x head_dim {model.head_dim} x 2 (K, V)")
    text = "\n".join([
        f"{model.name}: {model.num_hidden_layers} layers, {layout}, {args.dtype}, tp={args.tp}"
        + (f", sliding_window={model.sliding_window}" if model.sliding_window else ""),
        f"  per token (all layers, one GPU): {per_token:,} B",
        f"  {args.batch} x {args.tokens} tokens: {format_bytes(total)}",
    ])
    return emit(data, text, args.json)


def comm_main(argv: list[str]) -> int:
    from ringlab.calc import grad_comm_bytes, parse_count, parse_size

    p = argparse.ArgumentParser(prog="ringlab calc comm",
                                description="Bytes each rank sends per optimizer step, and model-state memory per GPU.")
    p.add_argument("--strategy", required=True, help="ddp, zero1, zero2, fsdp_shard_grad_op, fsdp_full_shard (zero3), hybrid_shard")
    p.add_argument("--params", required=True, help="parameter count, e.g. 7e9 or 7B (B = billion here)")
    p.add_argument("--world-size", type=int, required=True, help="data-parallel ranks")
    p.add_argument("--dtype", default="bf16", help="dtype of parameters and gradients (default bf16)")
    p.add_argument("--gpus-per-node", type=int, default=None, help="for hybrid_shard")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step (default 1)")
    p.add_argument("--bandwidth", default=None, help="link bandwidth per direction per second, e.g. 450GB; adds a time estimate")
    p.add_argument("--alpha-us", type=float, default=0.0, help="per-step latency in microseconds (with --bandwidth)")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    try:
        result = grad_comm_bytes(args.strategy, parse_count(args.params), args.world_size, args.dtype,
                                 gpus_per_node=args.gpus_per_node, grad_accum_steps=args.grad_accum)
        link = None
        if args.bandwidth is not None:
            link = SimpleNamespace(alpha=args.alpha_us * 1e-6, bandwidth=parse_size(args.bandwidth))
        seconds = result.time(link) if link else None
    except (ValueError, TypeError) as e:
        return fail(p.prog, e)
    data = {
        "strategy": result.strategy, "n_params": result.n_params, "world_size": result.world_size,
        "dtype": result.dtype, "grad_accum_steps": result.grad_accum_steps,
        "message": _sizes(result.message_bytes), "bytes_sent_per_rank": result.bytes_sent_per_rank,
        "breakdown": [{"collective": c.collective, "pass": c.phase, "group": c.group, "group_size": c.group_size,
                       "count": c.count, "bytes_sent": c.bytes_sent} for c in result.breakdown],
        "memory_per_gpu": {"params": result.memory.params, "grads": result.memory.grads,
                           "optimizer_states": result.memory.optimizer_states, "total": result.memory.total},
        "time_s": seconds, "notes": list(result.notes),
    }
    text = result.summary() + (f"\n  time at {args.bandwidth}/s per direction: {seconds * 1e3:,.1f} ms" if link else "")
    return emit(data, text, args.json)


def _usage() -> str:
    lines = ["usage: ringlab calc <calculator> [options]", "", "calculators:"]
    lines += [f"  {name:<10} {summary}" for name, (_, _, summary) in sorted(SUBCOMMANDS.items())]
    lines += ["", "Run 'ringlab calc <calculator> --help' for its options."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Dispatch ``ringlab calc <calculator> ...`` to the function registered in ``SUBCOMMANDS``."""
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if argv[0] not in SUBCOMMANDS:
        print(f"ringlab calc: unknown calculator {argv[0]!r}; choose one of: {', '.join(sorted(SUBCOMMANDS))}",
              file=sys.stderr)
        return 2
    module, function, _ = SUBCOMMANDS[argv[0]]
    return int(getattr(importlib.import_module(module), function)(argv[1:]) or 0)
