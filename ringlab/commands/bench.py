"""``ringlab bench``: nccl-tests-style bandwidth table, torch.distributed's collective vs ringlab's ring.

Starts ``--world-size`` local processes (gloo on CPU, nccl on GPUs), times both implementations
for sizes doubling from ``--min-bytes`` to ``--max-bytes`` and prints time, algbw and busbw
(GB/s = 1e9 B/s, nccl-tests doc/PERFORMANCE.md) with the ratio ringlab time / library time.
"""

from __future__ import annotations

import argparse
import sys

from ringlab.calc.units import parse_size
from ringlab.dist import LaunchTimeout, RankError
from ringlab.dist.bench import COLLECTIVES, DTYPES, format_table, run_bench, write_csv


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringlab bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collective", default="all_reduce", choices=COLLECTIVES)
    p.add_argument("--world-size", type=int, default=2, help="number of local processes (default 2)")
    p.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    p.add_argument("--min-bytes", default="8", help="smallest message S, e.g. 8, 1KiB, 1MB (default 8)")
    p.add_argument("--max-bytes", default="256MiB", help="largest message S (default 256MiB); sizes double")
    p.add_argument("--dtype", default="float32", choices=DTYPES)
    p.add_argument("--iters", type=int, default=20, help="timed calls per size and implementation (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds for the whole run (default 1800)")
    p.add_argument("--csv", metavar="PATH", help="also write the rows to this CSV file")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        min_bytes, max_bytes = parse_size(args.min_bytes), parse_size(args.max_bytes)
        rows = run_bench(args.collective, args.world_size, args.backend, min_bytes, max_bytes, args.dtype,
                         args.iters, args.warmup, args.timeout)
    except (ValueError, TypeError, ImportError) as exc:
        print(f"ringlab bench: {exc}", file=sys.stderr)
        return 2
    except (RankError, LaunchTimeout) as exc:
        print(f"ringlab bench: {exc}", file=sys.stderr)
        return 1
    print(format_table(rows))
    if args.csv:
        write_csv(rows, args.csv)
        print(f"# wrote {len(rows)} rows to {args.csv}")
    return 0
