"""``ringlab calc roofline | decode | bubble``: the performance calculators of issue 7.

    ringlab calc roofline --flops 512e9 --bytes 8e9 --hardware a100-sxm-80gb [--dtype bf16] [--sparse] [--json]
    ringlab calc decode --model llama-2-7b --hardware a100-sxm-80gb --context 4096 --sla-ms 50 [--batch N] [--tp N] [--json]
    ringlab calc bubble --stages 8 --microbatches 16 --schedule 1f1b [--virtual-stages v] [--grid] [--json]

Registered in ``SUBCOMMANDS`` of :mod:`ringlab.commands.calc`, whose ``emit`` and ``fail`` print
results and errors.
"""

from __future__ import annotations

from ringlab import cli_args, textfmt
from ringlab.calc.decode import DEFAULT_MEMORY_FRACTION, decode_step, max_batch_for_sla, naive_linear_decode_time
from ringlab.calc.pipeline import SCHEDULES, bubble_fraction, peak_in_flight, pipeline_schedule
from ringlab.calc.roofline import roofline
from ringlab.calc.units import canonical_dtype
from ringlab.collectives.cost import get_link
from ringlab.commands.calc import emit, fail
from ringlab.topology import get_cluster
from ringlab.topology.timing import group_cluster, ring_link


def roofline_main(argv: list[str]) -> int:
    p = cli_args.ArgumentParser(prog="ringlab calc roofline",
                                description="Place a kernel on a roofline: memory- or compute-bound, and its time.")
    p.add_argument("--flops", type=cli_args.real(min=0, min_open=True, max=1e30), required=True, help="FLOPs the kernel performs, e.g. 512e9")
    p.add_argument("--bytes", type=cli_args.size(), required=True, help="bytes moved to/from HBM, e.g. 8e9 or 8GB (GB = 1e9 B)")
    p.add_argument("--hardware", type=cli_args.text(), required=True, help="hardware preset, e.g. a100-sxm-80gb")
    p.add_argument("--dtype", type=cli_args.text(), default="bf16", help="dtype of the math (default bf16)")
    p.add_argument("--sparse", action="store_true", help="use the 2:4-sparse peak (dense by default)")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    try:
        result = roofline(args.flops, args.bytes, args.hardware, args.dtype, sparse=args.sparse)
    except (ValueError, TypeError) as e:
        return fail(p.prog, e)
    return emit(result.to_dict(), result.summary(), args.json)


def decode_main(argv: list[str]) -> int:
    p = cli_args.ArgumentParser(
        prog="ringlab calc decode",
        description="Decode step time vs batch size (weights read once per step) and the largest batch "
                    "meeting a time-per-output-token SLA that fits in memory.")
    p.add_argument("--model", type=cli_args.name_or_path, required=True, help="model preset or path to a HF config.json")
    p.add_argument("--hardware", type=cli_args.text(), required=True, help="hardware preset, e.g. a100-sxm-80gb")
    p.add_argument("--context", type=cli_args.integer(min=1, max=10**8), required=True, help="tokens in each sequence's KV cache")
    p.add_argument("--sla-ms", type=cli_args.real(min=1e-3, max=1e7), default=None, help="time per output token SLA in ms: find the largest batch")
    p.add_argument("--batch", type=cli_args.integer(min=1, max=10**7), default=None, help="evaluate this batch size")
    p.add_argument("--dtype", type=cli_args.text(), default="bf16", help="weights and activations dtype (default bf16)")
    p.add_argument("--kv-dtype", type=cli_args.text(), default=None, help="KV-cache dtype (default: --dtype)")
    p.add_argument("--tp", type=cli_args.integer(min=1, max=4096), default=1, help="tensor-parallel degree; memory and bytes are per GPU")
    p.add_argument("--fabric", type=cli_args.text(), default=None,
                   help="link for the TP all-reduces, a preset of ringlab.collectives.cost (e.g. nvlink4) with its "
                        "latency; default: the chip's NVLink bandwidth with zero latency")
    p.add_argument("--topology", type=cli_args.text(), default=None,
                   help="cluster preset of ringlab.topology: the TP all-reduces run as NCCL-style rings over the "
                        "GPUs the TP group spans (inside one NVLink domain when --tp fits in a node)")
    p.add_argument("--nodes", type=cli_args.integer(min=1, max=100_000), default=None,
                   help="nodes of --topology (default: as many as --tp needs)")
    p.add_argument("--memory-fraction", type=cli_args.real(min=0.01, max=1), default=DEFAULT_MEMORY_FRACTION,
                   help=f"share of GPU memory for weights + KV (default {DEFAULT_MEMORY_FRACTION}, vLLM's)")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    if args.sla_ms is None and args.batch is None:
        p.error("give --sla-ms, --batch, or both")
    data, text = {}, []
    try:
        for option, dtype in (("--dtype", args.dtype), ("--kv-dtype", args.kv_dtype)):
            try:
                if dtype is not None:
                    canonical_dtype(dtype)
            except ValueError as e:
                raise ValueError(f"{option}: {e}") from None
        link = None
        if args.fabric is not None and args.topology is not None:
            raise ValueError("--fabric is one flat link and --topology a cluster: give one of them")
        if args.nodes is not None and args.topology is None:
            raise ValueError("--nodes needs --topology")
        if args.fabric is not None:
            link = get_link(args.fabric)
        if args.topology is not None:
            link = _tp_link(args.topology, args.nodes, args.tp)
            data["topology"] = {"name": args.topology, "tp_link": link.name, "alpha_s": link.alpha,
                                "bandwidth_Bps": link.bandwidth}
            text.append(f"TP all-reduce over {args.tp} GPU(s) of {args.topology}: {link.name}, alpha "
                        f"{link.alpha * 1e6:g} us per step, {link.bandwidth / 1e9:g} GB/s")
        common = dict(dtype=args.dtype, kv_dtype=args.kv_dtype, tp=args.tp)
        if args.sla_ms is not None:
            sla = max_batch_for_sla(args.model, args.hardware, args.context, args.sla_ms / 1e3,
                                    memory_fraction=args.memory_fraction, link=link, **common)
            data["sla"] = sla.to_dict()
            text.append(sla.summary())
        if args.batch is not None:
            step = decode_step(args.model, args.hardware, args.batch, args.context,
                               memory_fraction=args.memory_fraction, link=link, **common)
            data["step"] = step.to_dict()
            text.append(step.summary())
        batch = args.batch if args.batch is not None else data["sla"]["batch_size"]
        if batch:
            wrong_step, wrong_tps = naive_linear_decode_time(args.model, args.hardware, batch, args.context,
                                                             link=link, **common)
            data["naive_linear_model"] = {"batch_size": batch, "step_time_s": wrong_step, "tokens_per_s": wrong_tps,
                                          "note": "WRONG: assumes each sequence streams all weights"}
            text.append(f"(the circulating linear model, which is wrong, would predict {wrong_step * 1e3:.4g} ms per "
                        f"step and {wrong_tps:,.0f} tokens/s at batch {batch}: it re-reads the weights per sequence)")
    except (ValueError, TypeError, OSError) as e:
        return fail(p.prog, e)
    return emit(data, "\n".join(text), args.json)


def _tp_link(topology: str, nodes: int | None, tp: int):
    """The ring all-reduce of a TP group of ``tp`` consecutive ranks on the cluster, as one alpha-beta link."""
    g = get_cluster(topology).gpus_per_node
    cluster = get_cluster(topology, nodes if nodes is not None else max(1, -(-tp // g)))
    return ring_link(group_cluster(cluster, tp), "all_reduce")


def bubble_main(argv: list[str]) -> int:
    p = cli_args.ArgumentParser(prog="ringlab calc bubble",
                                description="Pipeline-parallel bubble fraction and peak in-flight micro-batches.")
    p.add_argument("--stages", type=cli_args.integer(min=1, max=100_000), required=True, help="pipeline stages P")
    p.add_argument("--microbatches", type=cli_args.integer(min=1, max=10**9), required=True, help="micro-batches per step M")
    p.add_argument("--schedule", type=cli_args.text(), default="1f1b", help=f"one of {', '.join(SCHEDULES)} (default 1f1b)")
    p.add_argument("--virtual-stages", type=cli_args.integer(min=1, max=1024), default=1, help="model chunks per device v (interleaved-1f1b)")
    p.add_argument("--t-f", type=cli_args.integer(min=1, max=10**9), default=1, help="forward time per micro-batch and chunk, in slots (default 1)")
    p.add_argument("--t-b", type=cli_args.integer(min=1, max=10**9), default=1, help="input-gradient backward time (default 1)")
    p.add_argument("--t-w", type=cli_args.integer(min=1, max=10**9), default=1, help="weight-gradient backward time (default 1)")
    p.add_argument("--grid", action="store_true", help="simulate the schedule, print its grid and measured bubble")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    shape = (args.stages, args.microbatches, args.schedule, args.virtual_stages)
    # The closed form takes stage times; the flags give chunk times (equal when v = 1).
    times = {name: value * args.virtual_stages for name, value in (("t_f", args.t_f), ("t_b", args.t_b), ("t_w", args.t_w))}
    try:
        ideal = bubble_fraction(*shape, relative_to="ideal", **times)
        total = bubble_fraction(*shape, relative_to="total", **times)
        peaks = peak_in_flight(*shape)
        grid = pipeline_schedule(*shape, t_f=args.t_f, t_b=args.t_b, t_w=args.t_w) if args.grid else None
    except (ValueError, TypeError) as e:
        return fail(p.prog, e)
    unit = "micro-batch chunks" if args.schedule == "interleaved-1f1b" else "micro-batches"
    data = {"stages": args.stages, "microbatches": args.microbatches, "schedule": args.schedule,
            "virtual_stages": args.virtual_stages, "t_f": args.t_f, "t_b": args.t_b, "t_w": args.t_w,
            "bubble_fraction_ideal": ideal, "bubble_fraction_total": total,
            "peak_in_flight": peaks.tolist(), "peak_in_flight_unit": unit}
    text = [f"{args.schedule}, P={args.stages}, M={args.microbatches}"
            + (f", v={args.virtual_stages}" if args.virtual_stages > 1 else ""),
            f"bubble: {ideal:.4f} of ideal compute time, {total:.4f} of wall clock",
            f"peak in-flight {unit} per stage: {peaks.tolist()}"]
    if grid is not None:
        data["grid_makespan"] = grid.makespan
        data["grid_idle_slots"] = grid.idle_slots().tolist()
        data["grid_bubble_fraction_ideal"] = grid.bubble_fraction("ideal")
        text += [f"simulated: {grid.makespan} slots, bubble {grid.bubble_fraction('ideal'):.4f} of ideal", grid.to_text(textfmt.WIDTH)]
    return emit(data, "\n".join(text), args.json)
