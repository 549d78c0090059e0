"""``ringlab calc <calculator> ...``: the capacity calculators of :mod:`ringlab.calc` on the command line.

    ringlab calc kv --model llama-2-70b --tokens 4096 --batch 32 --dtype fp16 [--tp N] [--block-size B] [--json]
    ringlab calc comm --strategy fsdp_full_shard (--params 7e9 | --model llama-2-7b) --world-size 64 [--dtype bf16] [--json]

To add a calculator (issue 7 adds roofline, decode, bubble): write a function ``main(argv: list[str])
-> int`` in your own module (e.g. ``ringlab/commands/calc_perf.py``) and add ONE line to
``SUBCOMMANDS`` below: ``"name": ("module", "function", "one-line summary")``. ``emit`` and
``fail`` here print results and errors the same way for every calculator.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

from ringlab import cli_args, textfmt
from ringlab.calc import (
    format_bytes,
    get_model,
    grad_comm_bytes,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    kv_heads_per_rank,
    parse_count,
)
from ringlab.calc.comm import canonical_strategy
from ringlab.calc.kvcache import kv_cache_by_layer_kind
from ringlab.topology import get_cluster

# name -> (module, function taking argv and returning an exit code, one-line summary)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "kv": ("ringlab.commands.calc", "kv_main", "KV-cache bytes for a model, context, batch, dtype and TP degree"),
    "comm": ("ringlab.commands.calc", "comm_main", "per-rank gradient traffic and memory of DDP / ZeRO / FSDP"),
    "roofline": ("ringlab.commands.calc_perf", "roofline_main", "memory- or compute-bound? roofline time of a kernel"),
    "decode": ("ringlab.commands.calc_perf", "decode_main", "decode step time vs batch; largest batch under a latency SLA"),
    "bubble": ("ringlab.commands.calc_perf", "bubble_main", "pipeline bubble fraction and in-flight micro-batches"),
    "train": ("ringlab.commands.calc_train", "train_main", "memory, traffic, FLOPs and MFU of DP x TP x PP x CP x EP training"),
}


def emit(data: dict, text: str, as_json: bool) -> int:
    """Print ``data`` as JSON (``--json``) or ``text``, each line wrapped at 100 columns under its own
    indent (tables in ``text`` must already fit: :func:`ringlab.textfmt.table`); return exit code 0."""
    print(cli_args.json_text(data) if as_json else textfmt.wrap_lines(text))
    return 0


def fail(prog: str, error: Exception) -> int:
    """Print ``error`` the way argparse does and return exit code 2."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    return 2


def _sizes(n: int) -> dict:
    return {"bytes": n, "GB": n / 1e9, "GiB": n / 2**30}


def _kind_text(row: dict) -> str:
    """One line of the per-layer-kind breakdown of ``calc kv``."""
    kind = {"none": "FFN-only (no mixer)", "linear": "linear (attention replaced)"}.get(row["mixer"], row["mixer"])
    if kind in ("sliding", "chunked"):
        kind = f"{'sliding window' if kind == 'sliding' else 'chunked attention'} {row['window']:,}"
    if row["mixer"] == "mla":
        layout = f"latent {row['k_head_dim']}"
    elif row["kv_heads"]:
        layout = f"{row['kv_heads']} KV heads/GPU x (K {row['k_head_dim']} + V {row['v_head_dim']})"
    else:
        return f"  {row['layers']:>4} x {kind}: no KV cache"
    return (f"  {row['layers']:>4} x {kind}: {layout}, {row['bytes_per_token']:,} B/token/layer, "
            f"holding {row['held_tokens']:,} tokens")


def _per_token_text(per_token: int, averaged: float, tokens: int) -> str:
    """The per-token line of ``calc kv``: one figure, or two when windows or blocks make them differ."""
    if round(averaged) == per_token:
        return f"  per token (every KV layer, one GPU): {per_token:,} B"
    why = "whole blocks round the context up" if averaged > per_token else "sliding windows hold fewer tokens"
    return (f"  per token (every KV layer, one GPU): {per_token:,} B while every layer holds the token; "
            f"{averaged:,.0f} B averaged over {tokens:,} tokens ({why})")


def kv_main(argv: list[str]) -> int:
    p = cli_args.ArgumentParser(prog="ringlab calc kv", description="KV-cache memory on one GPU (GB = 1e9 B, GiB = 2**30 B).")
    p.add_argument("--model", type=cli_args.name_or_path, required=True,
                   help="preset name (e.g. llama-2-70b) or path to a HF config.json")
    p.add_argument("--tokens", type=cli_args.integer(min=1, max=10**9), required=True, help="tokens per sequence (context length)")
    p.add_argument("--batch", type=cli_args.integer(min=1, max=10**7), default=1, help="number of sequences (default 1)")
    p.add_argument("--dtype", type=cli_args.text(), default="fp16", help="cache dtype: fp32, fp16, bf16, fp8, int8 (default fp16)")
    p.add_argument("--tp", type=cli_args.integer(min=1, max=4096), default=1,
                   help="tensor-parallel degree; bytes are per GPU (default 1)")
    p.add_argument("--block-size", type=cli_args.integer(min=1, max=10**6), default=None, help="paged-attention block size in tokens")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    try:
        model = get_model(args.model)
        per_token = kv_cache_bytes_per_token(model, args.dtype, args.tp)
        total = kv_cache_bytes(model, args.tokens, args.batch, args.dtype, args.tp, args.block_size)
        kinds = kv_cache_by_layer_kind(model, args.tokens, args.dtype, args.tp)
        heads = None if model.uses_mla else kv_heads_per_rank(model, args.tp)
    except (ValueError, TypeError, OSError) as e:
        return fail(p.prog, e)
    data = {
        "model": model.name, "tokens": args.tokens, "batch_size": args.batch, "dtype": args.dtype, "tp": args.tp,
        "block_size": args.block_size, "num_hidden_layers": model.num_hidden_layers,
        "num_key_value_heads": model.num_key_value_heads, "kv_heads_per_rank": heads, "head_dim": model.head_dim,
        "mla": model.uses_mla, "sliding_window": model.sliding_window, "layers": kinds,
        "bytes_per_token": per_token, "bytes_per_token_at_context": total / (args.tokens * args.batch),
        "total": _sizes(total), "notes": list(model.notes),
    }
    text = "\n".join([
        f"{model.name}: {model.num_hidden_layers} layers, {args.dtype}, tp={args.tp}",
        *(_kind_text(row) for row in kinds),
        _per_token_text(per_token, total / (args.tokens * args.batch), args.tokens),
        f"  {args.batch:,} x {args.tokens:,} tokens: {format_bytes(total)}",
        *(f"  note: {n}" for n in model.notes),
    ])
    return emit(data, text, args.json)


def comm_main(argv: list[str]) -> int:
    p = cli_args.ArgumentParser(prog="ringlab calc comm",
                                description="Bytes each rank sends per optimizer step, and model-state memory per GPU.")
    p.add_argument("--strategy", type=cli_args.text(), required=True, help="ddp, zero1, zero2, fsdp_shard_grad_op, fsdp_full_shard (zero3), hybrid_shard")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--params", type=cli_args.count(), help="parameter count, e.g. 7e9 or 7B (B = billion here)")
    source.add_argument("--model", type=cli_args.name_or_path, help="model preset or config.json path: its parameter count, layer by layer")
    p.add_argument("--world-size", type=cli_args.integer(min=1, max=1 << 24), default=None, help="data-parallel ranks (default with --topology: all its GPUs)")
    p.add_argument("--dtype", type=cli_args.text(), default="bf16", help="dtype of parameters and gradients (default bf16)")
    p.add_argument("--gpus-per-node", type=cli_args.integer(min=1, max=1024), default=None,
                   help="ranks per node that shard the model, for --strategy hybrid_shard (default with --topology: "
                        "its GPUs per node)")
    p.add_argument("--grad-accum", type=cli_args.integer(min=1, max=10**6), default=1, help="micro-batches per optimizer step (default 1)")
    p.add_argument("--bandwidth", type=cli_args.bandwidth(), default=None,
                   help="link bandwidth per direction, e.g. 450GB/s or 400Gb/s (bits); adds a time estimate")
    p.add_argument("--alpha-us", type=cli_args.real(min=0, max=1e6), default=None,
                   help="per-step latency in microseconds (with --bandwidth; default 0)")
    p.add_argument("--topology", type=cli_args.text(), default=None,
                   help="cluster preset of ringlab.topology (dgx-h100, ...): time from its "
                                                    "NVLink domains and rails instead of one link")
    p.add_argument("--nodes", type=cli_args.integer(min=1, max=100_000), default=None,
                   help="nodes of --topology (default: world size / GPUs per node)")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    try:
        n_params = get_model(args.model).param_count() if args.model else parse_count(args.params)
        if args.gpus_per_node is not None and canonical_strategy(args.strategy) != "hybrid_shard":
            raise ValueError(f"--gpus-per-node applies to --strategy hybrid_shard only; {args.strategy} shards "
                             "over all ranks or none")
        if args.alpha_us is not None and args.bandwidth is None:
            raise ValueError("--alpha-us is the latency of the --bandwidth link; give --bandwidth too (--topology "
                             "has its own latencies)")
        cluster = _comm_cluster(args)
        if args.world_size is None:
            raise ValueError("--world-size is required (or --topology with --nodes)")
        result = grad_comm_bytes(args.strategy, n_params, args.world_size, args.dtype,
                                 gpus_per_node=args.gpus_per_node, grad_accum_steps=args.grad_accum)
        link = None
        if args.bandwidth is not None:
            link = SimpleNamespace(alpha=(args.alpha_us or 0.0) * 1e-6, bandwidth=float(args.bandwidth))
        seconds = result.time(link) if link else result.time_on_cluster(cluster) if cluster else None
    except (ValueError, TypeError, OSError) as e:
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
    if cluster is not None:
        data["topology"] = {"name": cluster.name, "nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node}
    text = result.summary() + (f"\n  time at {args.bandwidth.echo()} per direction: {seconds * 1e3:,.1f} ms" if link else "")
    if cluster is not None:
        text += (f"\n  time on {cluster.nodes} x {cluster.name} (NCCL-style rings; world groups cross the node on all "
                 f"{cluster.nics_per_node} NICs): {seconds * 1e3:,.1f} ms")
    return emit(data, text, args.json)


def _comm_cluster(args):
    """The cluster of ``--topology``/``--nodes`` (None without them); fills --world-size and --gpus-per-node."""
    if args.topology is None:
        if args.nodes is not None:
            raise ValueError("--nodes needs --topology")
        return None
    if args.bandwidth is not None:
        raise ValueError("--bandwidth times one flat link; --topology times the cluster: give one of them")
    g = get_cluster(args.topology).gpus_per_node
    nodes = args.nodes
    if nodes is None:
        if args.world_size is None or args.world_size % g:
            raise ValueError(f"--topology {args.topology} has {g} GPUs per node: give --nodes, or a --world-size "
                             f"that is a multiple of {g}")
        nodes = args.world_size // g
    cluster = get_cluster(args.topology, nodes)
    if args.world_size is None:
        args.world_size = cluster.world_size
    elif args.world_size != cluster.world_size:
        raise ValueError(f"--world-size {args.world_size} differs from --nodes {nodes} x {g} GPUs = {cluster.world_size}")
    if args.gpus_per_node is None and args.strategy.replace("-", "_") in ("hybrid_shard",):
        args.gpus_per_node = g
    return cluster


def _usage() -> str:
    lines = ["usage: ringlab calc <calculator> [options]", "", "calculators:"]
    lines += [f"  {name:<10} {summary}" for name, (_, _, summary) in sorted(SUBCOMMANDS.items())]
    lines += ["", "Run 'ringlab calc <calculator> --help' for its options."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Dispatch ``ringlab calc <calculator> ...`` to the function registered in ``SUBCOMMANDS``."""
    return cli_args.dispatch("ringlab calc", SUBCOMMANDS, argv, usage=_usage(), noun="calculator", sort=True)
