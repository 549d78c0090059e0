"""``ringlab plan train | serve``: search the layouts of a training job, or the serving configurations of a model.

    ringlab plan train --model llama-3-405b --gpus 16384 --topology dgx-h100 --seq-len 8192 \\
        --tokens-per-step 16M [--top 10] [--margin 0.1] [--json]
    ringlab plan serve --model llama-3-8b --hardware h100-sxm --rate 20 --sla-ttft 500ms --sla-tpot 50ms [--json]

The searches are :func:`ringlab.plan.train.plan_train` and :func:`ringlab.plan.serve.plan_serve`; every
number comes from ``ringlab calc train`` and ``ringlab serve-sim``'s models.
"""

from __future__ import annotations

from ringlab import cli_args, textfmt
from ringlab.calc.training.step import PRESET_HARDWARE
from ringlab.commands.calc import emit, fail
from ringlab.plan.published import published_for, rank_published
from ringlab.plan.space import MARGIN, TrainJob
from ringlab.plan.train import plan_train

PROG = "ringlab plan"


def _train_parser() -> cli_args.ArgumentParser:
    p = cli_args.ArgumentParser(prog=f"{PROG} train",
                                description="The fastest DP x TP x PP x CP x EP layouts (ZeRO, recompute, micro-batch, "
                                            "virtual stages) that fit, ranked by step time, with the constraint that "
                                            "binds each and why the next one loses (GB = 1e9 B).")
    p.add_argument("--model", type=cli_args.name_or_path, required=True, help="preset name or path to a HF config.json")
    p.add_argument("--gpus", type=cli_args.count(min=1, max=1 << 22), required=True, help="GPUs in the job")
    p.add_argument("--topology", type=cli_args.text(), default="dgx-h100",
                   help=f"cluster preset: {', '.join(PRESET_HARDWARE)} (default dgx-h100)")
    p.add_argument("--seq-len", type=cli_args.integer(min=1, max=10**8), required=True, help="tokens per sequence")
    batch = p.add_mutually_exclusive_group(required=True)
    batch.add_argument("--tokens-per-step", type=cli_args.count(min=1, max=10**15),
                       help="tokens per optimizer step (16M: the power-of-two batch within 5%% is taken, as papers "
                            "round 2**24 to 16M)")
    batch.add_argument("--global-batch", type=cli_args.integer(min=1, max=10**9), help="sequences per optimizer step")
    p.add_argument("--top", type=cli_args.integer(min=1, max=1000), default=10, help="layouts to list (default 10)")
    p.add_argument("--margin", type=cli_args.real(min=0.0, max=0.9), default=MARGIN,
                   help=f"share of HBM left free (default {MARGIN:g})")
    p.add_argument("--efficiency", type=cli_args.real(min=0.01, max=1.0), default=0.75,
                   help="share of the dense peak the matmuls reach (an assumption; default 0.75)")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def sequences_per_step(tokens: int, seq_len: int) -> tuple[int, str]:
    """Sequences per step for ``tokens`` tokens of ``seq_len``, and a note when it is not exact.

    Exact when ``seq_len`` divides ``tokens``. Otherwise the power of two within 5% (papers write 16M for
    2**24 = 16,777,216 tokens: 2,048 sequences of 8,192), else ValueError naming ``--tokens-per-step``.
    """
    if tokens % seq_len == 0:
        return tokens // seq_len, ""
    exact = tokens / seq_len
    power = 1 << max(0, round(exact).bit_length() - 1)
    for candidate in (power, power * 2):
        if abs(candidate - exact) <= 0.05 * exact:
            return candidate, (f"--tokens-per-step {tokens:,} is {exact:,.1f} sequences of {seq_len:,}; taking "
                               f"{candidate:,} ({candidate * seq_len:,} tokens), the power of two papers round to it")
    raise ValueError(f"--tokens-per-step {tokens:,} is {exact:,.2f} sequences of {seq_len:,} tokens, not a whole "
                     "number: give --global-batch (sequences per step) instead")


def search_summary(search) -> list[str]:
    """Lines saying how big the space was and what was refused, pruned and evaluated."""
    refused = search.refused
    lines = [f"  searched {search.configurations:,} configurations of {search.job.gpus:,} GPUs; "
             f"train_plan evaluated {search.evaluated:,} of them"]
    for title, counts in (("shapes refused", refused.shapes), ("configurations refused", refused.configurations),
                          ("configurations pruned", search.pruned)):
        if counts:
            lines.append(f"  {title}: " + "; ".join(f"{reason} {n:,}" for reason, n in sorted(counts.items())))
    return lines


def train_main(argv: list[str]) -> int:
    p = _train_parser()
    a = p.parse_args(argv)
    try:
        note = ""
        gb = a.global_batch
        if gb is None:
            gb, note = sequences_per_step(a.tokens_per_step, a.seq_len)
        job = TrainJob(a.model, a.gpus, a.topology, a.seq_len, gb, a.margin, a.efficiency)
        search = plan_train(job, a.top)
    except (ValueError, TypeError, OSError) as e:
        return fail(p.prog, e)
    rows = search.layouts
    data = {"job": {"model": job.model.name, "gpus": job.gpus, "topology": job.topology,
                    "hardware": job.hardware.name, "seq_len": job.seq_len, "global_batch": job.global_batch,
                    "tokens_per_step": job.seq_len * job.global_batch, "margin": job.margin,
                    "usable_memory_bytes": job.usable_memory, "compute_efficiency": job.compute_efficiency},
            "configurations": search.configurations, "evaluated": search.evaluated,
            "refused_shapes": dict(search.refused.shapes), "refused_configurations": dict(search.refused.configurations),
            "pruned": dict(search.pruned), "layouts": [r.as_dict() for r in rows], "notes": [note] if note else []}
    lines = [f"{job.describe()}; keep {job.usable_memory / 1e9:.1f} of {job.hardware.memory / 1e9:.0f} GB per GPU "
             f"(margin {job.margin:.0%})"]
    lines += [f"  note: {note}"] if note else []
    lines += search_summary(search)
    if not rows:
        lines.append("  no layout fits: every configuration needs more memory per GPU than is usable "
                     "(more GPUs, a smaller --margin or a shorter --seq-len)")
        return emit(data, "\n".join(lines), a.json)
    table = [[str(r.rank), str(r.candidate.dp), str(r.candidate.tp), str(r.candidate.pp), str(r.candidate.cp),
              str(r.candidate.ep), str(r.candidate.virtual_stages), r.as_dict()["zero"].__str__(),
              r.candidate.recompute, str(r.candidate.micro_batch), f"{r.step_seconds:.3f}", f"{r.mfu:.1%}",
              f"{r.memory_bytes / 1e9:.1f}", r.binding_text] for r in rows]
    lines += textfmt.table(["#", "dp", "tp", "pp", "cp", "ep", "vp", "zero", "recomp", "mb", "step s", "MFU",
                            "GB", "binding constraint"], table, align="rrrrrrrrlrrrrl", indent="  ")
    lines.append("  why each loses to the one above:")
    lines += [f"    #{r.rank}: {r.loses}" for r in rows[1:]]
    pub = published_for(job)
    if pub is not None:  # the job of a published run: place its layout
        placed = rank_published(pub.name, search=search)
        data["published"] = {"name": pub.name, "dp": pub.dp, "tp": pub.tp, "pp": pub.pp, "cp": pub.cp, "ep": pub.ep,
                             "source": pub.source, "rank": placed.rank, "term": placed.term,
                             "explanation": placed.explanation}
        lines.append(f"  published layout ({pub.source}): DP {pub.dp} TP {pub.tp} PP {pub.pp} CP {pub.cp} EP {pub.ep}: "
                     f"{placed.explanation}")
    return emit(data, "\n".join(lines), a.json)


# name -> (module, function taking argv and returning an exit code, one-line summary), as ``ringlab calc``'s
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "train": ("ringlab.commands.plan", "train_main",
              "the fastest training layouts of a model on a cluster, with the constraint binding each"),
    "serve": ("ringlab.commands.plan_serve", "serve_main",
              "the cheapest serving configuration (GPUs) meeting a TTFT / TPOT SLA"),
}


def _usage() -> str:
    lines = [f"usage: {PROG} {{train,serve}} [options]", ""]
    lines += [f"  {name}   {summary}" for name, (_, _, summary) in SUBCOMMANDS.items()]
    lines += ["", f"Run '{PROG} train --help' or '{PROG} serve --help' for their options."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Dispatch ``ringlab plan train | serve ...`` to the function registered in ``SUBCOMMANDS``."""
    return cli_args.dispatch(PROG, SUBCOMMANDS, argv, usage=_usage(), noun="search")
