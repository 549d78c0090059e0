"""``ringlab cost``: bytes per rank, steps and alpha-beta time of every algorithm of a collective.

Example: ``ringlab cost --collective all_reduce --world-size 64 --size 1GiB --fabric nvlink4``.
The model and its sources are in :mod:`ringlab.collectives.cost`.
"""

from __future__ import annotations

import argparse
import json
import sys

from ringlab.collectives import COLLECTIVES
from ringlab.collectives.cost import LARGE_MESSAGE_ALGORITHM, LINKS, Link, cost_table, crossover, get_link, linear_cost
from ringlab.calc.units import parse_size


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringlab cost", description=__doc__.splitlines()[0])
    p.add_argument("--collective", default="all_reduce", choices=COLLECTIVES)
    p.add_argument("--world-size", type=int, default=64, help="number of ranks N (default 64)")
    p.add_argument("--size", default="1GiB",
                   help="message size S as nccl-tests defines it, e.g. 1GiB, 64MB, 4096 (default 1GiB)")
    p.add_argument("--fabric", default="nvlink4", help=f"link preset: {', '.join(LINKS)} (default nvlink4)")
    p.add_argument("--alpha", type=float, help="override the preset's latency per step, seconds")
    p.add_argument("--bandwidth", type=float, help="override the preset's bandwidth, bytes/s per direction")
    p.add_argument("--gamma", type=float, default=0.0, help="seconds per byte reduced (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def _format(rows: list[dict], header: str) -> str:
    head = ["algorithm", "bytes/rank (max)", "GB", "GiB", "steps", "time (us)", "busbw GB/s"]
    cells = [[r["algorithm"], f"{r['bytes_per_rank_max']:,}", f"{r['bytes_per_rank_max'] / 1e9:.3f}",
              f"{r['bytes_per_rank_max'] / 2**30:.3f}",
              str(r["steps"]) + ("" if r["latency_terms"] == r["steps"] else f" ({r['latency_terms']} alpha)"),
              f"{r['seconds'] * 1e6:,.1f}", "-" if r["busbw"] is None else f"{r['busbw'] / 1e9:.1f}"]
             for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{widths[0]}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [header, fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*c) for c in cells]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        link = get_link(args.fabric)
        if args.alpha is not None or args.bandwidth is not None:
            link = Link(f"{link.name} (custom)", args.alpha if args.alpha is not None else link.alpha,
                        args.bandwidth if args.bandwidth is not None else link.bandwidth, link.source)
        if args.world_size < 1:
            raise ValueError(f"--world-size must be >= 1, got {args.world_size}")
        size = parse_size(args.size)
        rows = cost_table(args.collective, args.world_size, size, link, args.gamma)
        base = LARGE_MESSAGE_ALGORITHM.get(args.collective)
        cross = crossover(args.collective, link, args.world_size, gamma=args.gamma) if base and len(rows) > 1 else {}
    except (ValueError, TypeError) as exc:
        parser.exit(2, f"ringlab cost: error: {exc}\n")
    if args.json:
        print(json.dumps({"collective": args.collective, "world_size": args.world_size, "message_bytes": size,
                          "fabric": {"name": link.name, "alpha_s": link.alpha, "bandwidth_Bps": link.bandwidth,
                                     "source": link.source},
                          "gamma_s_per_byte": args.gamma, "algorithms": rows,
                          "crossover_bytes": {"against": base, **cross} if cross else None}, indent=2))
        return 0
    header = (f"{args.collective}, N={args.world_size}, S={size:,} B ({size / 1e9:.3f} GB, {size / 2**30:.3f} GiB), "
              f"{link.name}: alpha={link.alpha * 1e6:g} us, {link.bandwidth / 1e9:g} GB/s per direction")
    print(_format(rows, header))
    for name, m in cross.items():
        if linear_cost(args.collective, base, args.world_size, link, args.gamma) == \
                linear_cost(args.collective, name, args.world_size, link, args.gamma):
            print(f"{base} ties with {name}: the same cost at every size in this model")
            continue
        where = ("never" if m is None else "always" if m == 0 else
                 f"above {m:,.0f} B ({m / 1e6:,.2f} MB)")
        print(f"{base} beats {name}: {where}")
    print("model: t = steps x alpha + busiest rank's bytes / bandwidth (+ gamma x bytes reduced); "
          "see ringlab.collectives.cost")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
