"""``ringlab serve-sim --split P:D`` and ``--best-split``: disaggregated prefill and decode against colocated serving.

The model is :mod:`ringlab.serving.disagg`. ``--split`` runs the requests once each way on the same GPUs and
prints both side by side: TTFT, TPOT, the KV transfers, and goodput when SLAs are given. ``--best-split``
searches the goodput of every split and of colocated serving, that is the highest rate meeting both p99 SLAs
(:func:`ringlab.serving.disagg.best_split`), and prints them best first.
"""

from __future__ import annotations

import numpy as np

from ringlab import cli_args, textfmt
from ringlab.serving.disagg import best_split, colocated, disaggregated, placement
from ringlab.topology import get_cluster

SEARCH_RESOLUTION = 0.05  # each split's rate bracket, high / low - 1: eight searches make --best-split slow
SEARCH_MAX_RUNS = 16


def _ms(value) -> str:
    return "-" if value is None else f"{value * 1e3:,.1f}"


def _row(label: str, m: dict, transfers: list[float]) -> dict:
    row = {"layout": label, "finished": m["finished"], "requests": m["requests"],
           "ttft_p50_s": m["ttft_p50_s"], "ttft_p99_s": m["ttft_p99_s"], "tpot_p50_s": m["tpot_p50_s"],
           "tpot_p99_s": m["tpot_p99_s"], "preemptions": m["preemptions_recompute"] + m["preemptions_swap"],
           "kv_transfer_p50_s": float(np.percentile(transfers, 50)) if transfers else None,
           "kv_transfer_p99_s": float(np.percentile(transfers, 99)) if transfers else None}
    for key in ("goodput_requests_per_s", "sla_attainment"):
        if key in m:
            row[key] = m[key]
    return row


def _header(args, n: int, requests: list) -> str:
    source = f"trace {args.trace}" if args.trace else f"a {args.rate:g}/s Poisson trace"
    return (f"{args.model} on {args.hardware}, {args.topology} x {args.nodes} node(s): {n} instance(s) of tp "
            f"{args.tp}; {len(requests):,} requests of {source}")


def main(args, scheduler, blocks: int, config, requests: list) -> int:
    """Run ``--split`` or ``--best-split`` for serve-sim's parsed ``args`` (the scheduler's settings, ``blocks``
    per instance) on ``requests``; print text or JSON; return the exit status. Raises ValueError (one line) for a
    split that does not fit the topology, or an instance of --tp GPUs that does not fit a node."""
    cluster = get_cluster(args.topology, args.nodes)
    n = placement(cluster, args.tp).instances
    common = dict(model=args.model, hardware=args.hardware, num_blocks=blocks, block_size=args.block_size,
                  config=config, dtype=args.dtype, tp=args.tp)
    if args.best_split:
        splits = best_split(requests, cluster, args.sla_ttft, args.sla_tpot, resolution=SEARCH_RESOLUTION,
                            max_runs=SEARCH_MAX_RUNS, **common)
        rows = [{"layout": s.label, "prefill": s.prefill, "decode": s.decode, "goodput_requests_per_s": s.goodput,
                 "bracket_per_s": list(s.search.bracket), "converged": s.search.converged, "runs": len(s.search.runs),
                 "note": s.search.note} for s in splits]
        if args.json:
            print(cli_args.json_text({"instances": n, "sla_ttft_s": args.sla_ttft, "sla_tpot_s": args.sla_tpot,
                                      "criterion": "p99 TTFT and p99 TPOT within the SLAs, every request finished",
                                      "splits": rows}))
            return 0
        print(textfmt.wrap(_header(args, n, requests) + f"; goodput = the highest rate with p99 TTFT <= "
                           f"{args.sla_ttft * 1e3:g} ms and p99 TPOT <= {args.sla_tpot * 1e3:g} ms"))
        print(f"{'layout':>10} {'goodput/s':>10} {'runs':>5}  note")
        for r in rows:
            goodput = "none" if r["goodput_requests_per_s"] is None else f"{r['goodput_requests_per_s']:,.2f}"
            print(f"{r['layout']:>10} {goodput:>10} {r['runs']:>5}  {r['note']}".rstrip())
        return 0
    p, d = args.split
    run = disaggregated(requests, p, d, cluster, **common)
    split = run.trace.metrics(args.sla_ttft, args.sla_tpot)
    base = colocated(requests, p + d, **common).metrics(args.sla_ttft, args.sla_tpot)
    transfers = [r["transfer_s"] for r in run.requests if r["transfer_s"] is not None]
    rows = [_row(f"{p}P:{d}D", split, transfers), _row(f"colocated x{p + d}", base, [])]
    if args.json:
        print(cli_args.json_text({"instances": p + d, "rows": rows}))
        return 0
    print(textfmt.wrap(_header(args, p + d, requests)))
    slas = args.sla_ttft is not None or args.sla_tpot is not None
    print(f"{'layout':>14} {'finished':>9} {'TTFT p50/p99 ms':>18} {'TPOT p50/p99 ms':>16} {'KV send p50/p99 ms':>19}"
          + (f" {'goodput/s':>10}" if slas else ""))
    for r in rows:
        line = (f"{r['layout']:>14} {r['finished']:>9,} {_ms(r['ttft_p50_s']) + ' / ' + _ms(r['ttft_p99_s']):>18} "
                f"{_ms(r['tpot_p50_s']) + ' / ' + _ms(r['tpot_p99_s']):>16} "
                f"{_ms(r['kv_transfer_p50_s']) + ' / ' + _ms(r['kv_transfer_p99_s']):>19}")
        if slas:
            goodput = r["goodput_requests_per_s"]
            line += f" {'-' if goodput is None else f'{goodput:,.2f}':>10}"
        print(line)
    return 0
