"""``ringlab calc train``: memory per GPU, traffic per dimension, FLOPs, step time and MFU of a training layout.

    ringlab calc train --model llama-3.1-405b --seq-len 8192 --micro-batch 1 --global-batch 2048 \\
        --dp 128 --tp 8 --pp 16 [--cp 1] [--ep 1] [--vp 1] [--sp] [--zero zero1] [--recompute none] \\
        [--topology dgx-h100] [--json]
"""

from __future__ import annotations

import inspect

from ringlab import cli_args, textfmt
from ringlab.calc import format_bytes
from ringlab.calc.training.layout import ParallelLayout
from ringlab.calc.training.memory import Precision, resolve_no_sync
from ringlab.calc.training.plan import train_plan
from ringlab.calc.training.step import MIN_EFFICIENCY, dimension_placement, resolve_cluster
from ringlab.commands.calc import emit, fail

_DEGREE = cli_args.integer(min=1, max=1 << 20)


def _parser() -> cli_args.ArgumentParser:
    p = cli_args.ArgumentParser(prog="ringlab calc train",
                                description="Per-GPU memory, per-step traffic, FLOPs and MFU of DP x TP x PP x CP x EP "
                                            "training (GB = 1e9 B, GiB = 2**30 B).")
    p.add_argument("--model", type=cli_args.name_or_path, required=True, help="preset name or path to a HF config.json")
    p.add_argument("--seq-len", type=cli_args.integer(min=1, max=10**8), required=True, help="tokens per sequence")
    p.add_argument("--micro-batch", type=cli_args.integer(min=1, max=10**6), default=1, help="sequences per micro-batch (default 1)")
    p.add_argument("--global-batch", type=cli_args.integer(min=1, max=10**9), required=True,
                   help="sequences per optimizer step, all replicas")
    for dim, text in (("dp", "data-parallel replicas"), ("tp", "tensor-parallel degree"), ("pp", "pipeline stages"),
                      ("cp", "context-parallel degree"), ("ep", "expert-parallel degree (MoE; divides dp x cp)"),
                      ("vp", "virtual pipeline stages per GPU (interleaved 1F1B)")):
        p.add_argument(f"--{dim}", type=_DEGREE, default=1, help=f"{text} (default 1)")
    p.add_argument("--sp", action="store_true", help="sequence parallelism over the TP group")
    p.add_argument("--zero", type=cli_args.text(), default="zero1",
                   help="ddp (ZeRO-0), zero1, zero2, fsdp_shard_grad_op, fsdp_full_shard / zero3 (default zero1)")
    p.add_argument("--recompute", type=cli_args.text(), default="none", help="none, selective or full (default none)")
    p.add_argument("--param-dtype", type=cli_args.text(), default="bf16", help="weights (default bf16; fp8 accepted)")
    p.add_argument("--grad-dtype", type=cli_args.text(), default="bf16", help="gradients (default bf16)")
    p.add_argument("--no-master-weights", action="store_true", help="no fp32 master copy (pure low-precision training)")
    p.add_argument("--fp32-grad-accum", action="store_true", help="add a 4 B/param fp32 gradient accumulation buffer")
    p.add_argument("--no-sync", action="store_true",
                   help="FSDP's no_sync: reduce-scatter gradients only in the last micro-batch, keeping them whole "
                        "until then (refused for zero2/zero3: DeepSpeed reduces every micro-batch)")
    p.add_argument("--no-flash", action="store_true", help="attention stores its score matrices (no FlashAttention)")
    p.add_argument("--dropout", action="store_true", help="count dropout masks (GPT-3-style training)")
    p.add_argument("--load-imbalance", type=cli_args.real(min=1.0, max=1e6), default=1.0,
                   help="MoE: tokens at the busiest expert rank over the mean (default 1.0)")
    p.add_argument("--topology", type=cli_args.text(), default=None,
                   help="ringlab.topology preset (dgx-h100, ...) for step time and MFU")
    p.add_argument("--hardware", type=cli_args.text(), default=None,
                   help="GPU preset for the step time, with --topology (default: the topology's)")
    p.add_argument("--efficiency", type=cli_args.real(min=0.0, max=1.0, min_open=True), default=None,
                   help=f"fraction of dense peak the matmuls reach in the step time, with --topology; {MIN_EFFICIENCY:g} "
                        "to 1 (an assumption; default 0.75)")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def _sizes(n: int) -> dict:
    return {"bytes": n, "GB": n / 1e9, "GiB": n / 2**30}


def train_main(argv: list[str]) -> int:
    p = _parser()
    a = p.parse_args(argv)
    if a.efficiency is not None and a.efficiency < MIN_EFFICIENCY:  # checked here: the grammar compares exact decimals with the float bound
        return fail(p.prog, ValueError(f"--efficiency {a.efficiency:g} is below {MIN_EFFICIENCY:g} of peak: a step "
                                       "would take hours and MFU round to nothing"))
    for flag, given in (("--hardware", a.hardware is not None), ("--efficiency", a.efficiency is not None)):
        if given and a.topology is None:
            return fail(p.prog, ValueError(f"{flag} sets the step time, which needs --topology; memory, traffic and "
                                           "FLOPs do not depend on it"))
    if a.vp > 1 and a.pp == 1:
        return fail(p.prog, ValueError(f"--vp {a.vp} interleaves the stages of a pipeline; --pp 1 has none (give "
                                       "--pp 2 or more, or leave --vp out)"))
    if a.efficiency is None:  # train_plan's own default, printed with the step time
        a.efficiency = inspect.signature(train_plan).parameters["compute_efficiency"].default
    try:
        if a.no_sync and resolve_no_sync(a.zero):
            raise ValueError(f"--no-sync changes nothing with --zero {a.zero}, which reduces gradients once per step "
                             "already; it is FSDP's no_sync (fsdp_shard_grad_op, fsdp_full_shard)")
        layout = ParallelLayout(a.dp, a.tp, a.pp, a.cp, a.ep, a.vp, a.sp)
        precision = Precision(a.param_dtype, a.grad_dtype, not a.no_master_weights, "fp32", a.fp32_grad_accum)
        plan = train_plan(a.model, layout, a.seq_len, a.micro_batch, a.global_batch, a.zero, a.recompute, precision,
                          a.dropout, a.load_imbalance, a.topology, a.hardware, a.efficiency,
                          flash_attention=not a.no_flash, no_sync=True if a.no_sync else None)
    except (ValueError, TypeError, OSError) as e:
        return fail(p.prog, e)
    b = plan.busiest
    mem = plan.memory[b]
    data = {
        "model": plan.model.name, "layout": layout.describe(), "world_size": layout.world_size,
        "seq_len": a.seq_len, "micro_batch": a.micro_batch, "global_batch": a.global_batch,
        "num_microbatches": plan.batch.num_microbatches, "strategy": plan.strategy, "recompute": plan.recompute,
        "busiest_stage": b,
        "memory_per_gpu": {"params": mem.states.params, "grads": mem.states.grads, "optimizer_states": mem.states.optimizer_states,
                           "activations": mem.activations.total, "temporary": mem.temporary, "total": _sizes(mem.total)},
        "stages": [{"stage": i, "params_held": m.states.n_params, "total_bytes": m.total,
                    "activations": m.activations.total, "in_flight": m.activations.in_flight}
                   for i, m in enumerate(plan.memory)],
        "traffic_per_step": [{"dim": t.dim, "collective": t.collective, "pass": t.phase, "group_size": t.group_size,
                              "count": t.count, "message_bytes": t.message_bytes, "bytes_sent": t.bytes_sent,
                              "what": t.what} for t in plan.traffic[b]],
        "bytes_sent_by_dimension": plan.traffic_by_dimension(),
        "flops_per_step": {"model": plan.flops.model_flops, "hardware": plan.flops.hardware_flops,
                           "six_nd": plan.flops.six_nd, "attention_forward": plan.flops.attention_forward},
    }
    lines = [f"{plan.model.name}: {layout.describe()}; seq {a.seq_len:,}, micro-batch {a.micro_batch}, global batch "
             f"{a.global_batch:,} ({plan.batch.num_microbatches} micro-batches per replica); {plan.strategy}, "
             f"recompute {plan.recompute}",
             f"  memory per GPU, stage {b} (the largest of {layout.pp}):",
             f"    parameters      {format_bytes(mem.states.params)}",
             f"    gradients       {format_bytes(mem.states.grads)}",
             f"    optimizer       {format_bytes(mem.states.optimizer_states)}",
             f"    activations     {format_bytes(mem.activations.total)} ({mem.activations.in_flight} in flight)",
             f"    temporary       {format_bytes(mem.temporary)}",
             f"    total           {format_bytes(mem.total)}",
             f"  traffic per step, one GPU of stage {b}:"]
    lines += textfmt.table(["dim", "count", "collective", "pass", "N", "sent GB", "what"],
                           [[t.dim, f"{t.count:,}", t.collective, t.phase, f"{t.group_size:,}",
                             f"{t.bytes_sent / 1e9:,.3f}", t.what] for t in plan.traffic[b]],
                           align="lrllrrl", indent="    ")
    lines.append(f"  FLOPs per step: model {plan.flops.model_flops:.4g} (6ND {plan.flops.six_nd:.4g} + attention), "
                 f"hardware {plan.flops.hardware_flops:.4g}")
    if plan.time is not None:
        placement = dimension_placement(layout, resolve_cluster(a.topology, layout.world_size))
        data["placement"] = placement
        lines += [f"  placement on {a.topology}: " + "; ".join(f"{d.upper()} {where}" for d, where in placement.items())]
        st = plan.time
        data["step"] = {"step_time_s": st.step_time, "breakdown_s": st.breakdown(), "compute_s": st.compute,
                        "memory_bound_s": st.memory_bound, "memory_bound_bytes": st.memory_bound_bytes,
                        "bubble_s": st.bubble, "tp_s": st.tp, "ep_s": st.ep, "cp_exposed_s": st.cp_exposed,
                        "pp_exposed_s": st.pp_exposed, "dp_exposed_s": st.dp_exposed, "mfu": st.mfu, "hfu": st.hfu,
                        "model_tflops_per_gpu": st.tflops_per_gpu, "compute_efficiency": a.efficiency,
                        "hardware": st.hardware, "hbm_bandwidth_Bps": st.hbm_bandwidth}
        lines += [f"  step on {a.topology} ({st.hardware}), stage {st.stage}: {st.step_time:.3f} s = matmul "
                  f"{st.compute:.3f} (at {a.efficiency:g} of peak, assumed) + memory-bound {st.memory_bound:.3f} "
                  f"({st.memory_bound_bytes / 1e9:,.1f} GB over {st.hbm_bandwidth / 1e12:.3g} TB/s of HBM) + exposed "
                  f"communication {st.exposed_communication:.3f} + bubble {st.bubble:.3f}",
                  f"    exposed communication: TP {st.tp:.3f}, EP {st.ep:.3f}, CP {st.cp_exposed:.3f}, "
                  f"PP {st.pp_exposed:.3f}, DP {st.dp_exposed:.3f}; MFU {st.mfu:.1%}, HFU {st.hfu:.1%}"]
    data["notes"] = list(plan.notes)
    lines += [f"  note: {n}" for n in plan.notes]
    return emit(data, "\n".join(lines), a.json)
