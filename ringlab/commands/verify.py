"""``ringlab verify``: check a collective algorithm at many world sizes; exit 1 on any mismatch."""

from __future__ import annotations

import argparse
import json
import re
import sys

from ringlab import cli_args
from ringlab.calc.units import parse_size
from ringlab.collectives import ALGORITHMS, COLLECTIVES
from ringlab.sim.on_cluster import verify_on_cluster
from ringlab.sim.memory import InsufficientMemory, check_fits, cluster_verify_bytes
from ringlab.sim.ops import OPS, resolve_dtype
from ringlab.sim.verify import DEFAULT_WORLD_SIZES, INPUTS, MAX_WORLD_SIZE, MAX_WORLD_SIZES_LISTED, verify
from ringlab.topology import CLUSTER_ALGORITHMS, build_on_cluster, get_cluster
from ringlab.topology.algorithms import check_transfers, transfers_estimate

DEFAULT_NODES = (1, 2, 3, 8)
DEFAULT_TRANSFERS = 1 << 21  # transfers of a default --topology check: a few seconds on a laptop


def parse_world_sizes(text: str) -> list[int]:
    """``"1-16,24,32"`` -> [1, ..., 16, 24, 32]: sizes in 1..MAX_WORLD_SIZE, at most
    MAX_WORLD_SIZES_LISTED of them, checked before any list is built. Raises ValueError."""
    sizes: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*([0-9]{1,7})\s*(?:-\s*([0-9]{1,7})\s*)?", part, re.ASCII)
        if not m:
            raise ValueError(f"cannot read world sizes {text[:80]!r}; write e.g. 1-16,24,32 "
                             f"(each size 1..{MAX_WORLD_SIZE})")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"world size range {part.strip()!r} is reversed; write {hi}-{lo}")
        if lo < 1 or hi > MAX_WORLD_SIZE:
            raise ValueError(f"world size range {part.strip()!r}: sizes must be in 1..{MAX_WORLD_SIZE}")
        if len(sizes) + hi - lo + 1 > MAX_WORLD_SIZES_LISTED:
            raise ValueError(f"world sizes {text[:80]!r} list more than {MAX_WORLD_SIZES_LISTED:,} runs")
        sizes.extend(range(lo, hi + 1))
    return sizes


def _world_sizes(text: str) -> list[int]:
    try:
        return parse_world_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = cli_args.ArgumentParser(prog="ringlab verify", description=__doc__)
    p.add_argument("--world-sizes", type=_world_sizes, default=None,
                   help="comma list with ranges, e.g. 1-16,24,32 (default: 1-16,24,32,64,128)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--numel", type=cli_args.count(min=0), help="elements per rank (random input; default 1000003)")
    size.add_argument("--size", type=cli_args.text(), help="message bytes per rank, e.g. 64MiB or 1GB (random input)")
    p.add_argument("--dtype", type=cli_args.text(), default="float32", help="float32, float16, bf16, float64, int8..int64, uint8..uint64")
    p.add_argument("--op", default="sum", choices=OPS)
    p.add_argument("--input", default=None, choices=INPUTS,
                   help="gradients: a real torch transformer block's per-rank gradients (default); random: seeded noise "
                        "(not with --topology, whose data is seeded int64)")
    p.add_argument("--collective", default="all_reduce", choices=COLLECTIVES)
    p.add_argument("--algorithm", type=cli_args.text(), default=None,
                   help="default: ring where the collective has it, else its first algorithm. Pairs: "
                        + ", ".join(f"{c}/{a}" for c, a in ALGORITHMS))
    p.add_argument("--root", type=cli_args.integer(min=0, max=MAX_WORLD_SIZE - 1), default=0, help="root rank of broadcast / reduce (default 0)")
    p.add_argument("--seed", type=cli_args.integer(min=0, max=2**63 - 1), default=0)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--topology", type=cli_args.text(), default=None,
                   help="cluster preset of ringlab.topology: run the algorithm (flat, or topology-aware: "
                        + ", ".join(sorted({a for _, a in CLUSTER_ALGORITHMS})) + ") routed on it and check results, "
                        "bytes per rank and bytes per link")
    p.add_argument("--nodes", type=_world_sizes, default=None,
                   help="with --topology: node counts (default: those of 1,2,3,8 the algorithm applies to whose "
                        f"schedule routes at most {DEFAULT_TRANSFERS:,} transfers, so that it runs in seconds)")
    return p


def _main_cluster(parser, args) -> int:
    """``--topology``: :func:`ringlab.sim.on_cluster.verify_on_cluster` at each node count, on seeded int64 data."""
    try:
        if args.world_sizes or args.size or args.dtype != "float32" or args.op != "sum" or args.root \
                or args.input is not None:
            raise ValueError("with --topology the world size is nodes x GPUs and the data seeded int64 with op=sum: "
                             "use --nodes and --numel, leave --world-sizes, --size, --dtype, --op, --root and --input "
                             "out")
        numel = 1001 if args.numel is None else args.numel
        algorithm = args.algorithm or "ring_channels"
        nodes = args.nodes
        if nodes is None:  # the default node counts the algorithm applies to (nvls: one node; trees: several),
            entry = CLUSTER_ALGORITHMS.get((args.collective, algorithm))  # small enough to check in seconds
            clusters = [get_cluster(args.topology, k) for k in DEFAULT_NODES]
            nodes = [c.nodes for c in clusters if (entry is None or entry.unavailable(c) is None)
                     and transfers_estimate(args.collective, algorithm, c) <= DEFAULT_TRANSFERS] or [1]
        else:  # every node count checked before any runs: refused at once, with the estimate
            for k in nodes:
                try:
                    check_transfers(args.collective, algorithm, get_cluster(args.topology, k))
                except ValueError as exc:
                    raise ValueError(f"--nodes {k}: {exc}") from None
        checks = []
        for k in nodes:
            cluster = get_cluster(args.topology, k)
            check_fits(f"--nodes {k} with --numel {numel:,} ({cluster.world_size:,} ranks)",
                       cluster_verify_bytes(build_on_cluster(args.collective, algorithm, cluster), numel))
            checks.append(verify_on_cluster(args.collective, algorithm, cluster, numel=numel, seed=args.seed))
    except (ValueError, TypeError, InsufficientMemory) as exc:
        parser.exit(2, f"ringlab verify: error: {exc}\n")
    fields = ("results", "rank_bytes", "links_vs_schedule", "closed_form", "egress_equals_moved", "nic_tx_equals_rx")
    ok = all(c.ok for c in checks)
    if args.json:
        print(json.dumps({"collective": args.collective, "algorithm": algorithm, "topology": args.topology,
                          "numel": numel, "seed": args.seed, "ok": ok,
                          "rows": [dict({f: getattr(c, f) for f in fields}, nodes=c.nodes, ok=c.ok) for c in checks]},
                         indent=2))
        return 0 if ok else 1
    print(f"{algorithm} {args.collective} on {args.topology}, {numel} int64 elements per rank (seed {args.seed})")
    print("nodes  " + "  ".join(fields))
    for c in checks:
        marks = ("-" if getattr(c, f) is None else "ok" if getattr(c, f) else "FAIL" for f in fields)
        print(f"{c.nodes:>5}  " + "  ".join(f"{m:>{len(f)}}" for m, f in zip(marks, fields)))
    print(f"{'ALL CHECKS PASSED' if ok else 'MISMATCH FOUND'}: {sum(c.ok for c in checks)}/{len(checks)} node counts")
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.topology is not None:
        return _main_cluster(parser, args)
    if args.nodes is not None:
        parser.exit(2, "ringlab verify: error: --nodes needs --topology\n")
    try:
        sizes = args.world_sizes or list(DEFAULT_WORLD_SIZES)
        numel = args.numel
        if args.size is not None:
            itemsize = resolve_dtype(args.dtype).itemsize
            nbytes = parse_size(args.size, "--size")
            if nbytes % itemsize:
                raise ValueError(f"--size {args.size} is not a multiple of the {args.dtype} item size ({itemsize} B)")
            numel = nbytes // itemsize
        args.input = args.input or "gradients"
        if numel is not None and args.input == "gradients":
            raise ValueError("--numel/--size set the random input's size; add --input random "
                             "(the gradient bucket has the model's parameter count)")
        report = verify(sizes, numel=numel, dtype=args.dtype, op=args.op, input=args.input,
                        collective=args.collective, seed=args.seed, algorithm=args.algorithm, root=args.root)
    except (ValueError, TypeError, ImportError, InsufficientMemory) as exc:
        parser.exit(2, f"ringlab verify: error: {exc}\n")
    print(report.to_json() if args.json else report.table(narrow=True))
    return 0 if report.ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
