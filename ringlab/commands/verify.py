"""``ringlab verify``: check a collective algorithm at many world sizes; exit 1 on any mismatch."""

from __future__ import annotations

import argparse
import re
import sys

from ringlab.calc.units import parse_size
from ringlab.sim.ops import OPS, resolve_dtype
from ringlab.collectives import ALGORITHMS, COLLECTIVES
from ringlab.sim.verify import DEFAULT_WORLD_SIZES, INPUTS, verify

def parse_world_sizes(text: str) -> list[int]:
    """``"1-16,24,32"`` -> [1, ..., 16, 24, 32]. Raises ValueError."""
    sizes: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise ValueError(f"cannot read world sizes {text!r}; write e.g. 1-16,24,32")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"world size range {part.strip()!r} is reversed; write {hi}-{lo}")
        sizes.extend(range(lo, hi + 1))
    return sizes


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringlab verify", description=__doc__)
    p.add_argument("--world-sizes", default=None,
                   help="comma list with ranges, e.g. 1-16,24,32 (default: 1-16,24,32,64,128)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--numel", type=int, help="elements per rank (random input; default 1000003)")
    size.add_argument("--size", help="message bytes per rank, e.g. 64MiB or 1GB (random input)")
    p.add_argument("--dtype", default="float32", help="float32, float16, bf16, float64, int8..int64, uint8..uint64")
    p.add_argument("--op", default="sum", choices=OPS)
    p.add_argument("--input", default="gradients", choices=INPUTS,
                   help="gradients: a real torch transformer block's per-rank gradients (default); random: seeded noise")
    p.add_argument("--collective", default="all_reduce", choices=COLLECTIVES)
    p.add_argument("--algorithm", default=None,
                   help="default: ring where the collective has it, else its first algorithm. Pairs: "
                        + ", ".join(f"{c}/{a}" for c, a in ALGORITHMS))
    p.add_argument("--root", type=int, default=0, help="root rank of broadcast / reduce (default 0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        sizes = parse_world_sizes(args.world_sizes) if args.world_sizes else list(DEFAULT_WORLD_SIZES)
        numel = args.numel
        if args.size is not None:
            itemsize = resolve_dtype(args.dtype).itemsize
            nbytes = parse_size(args.size)
            if nbytes % itemsize:
                raise ValueError(f"--size {args.size} is not a multiple of the {args.dtype} item size ({itemsize} B)")
            numel = nbytes // itemsize
        if numel is not None and args.input == "gradients":
            raise ValueError("--numel/--size set the random input's size; add --input random "
                             "(the gradient bucket has the model's parameter count)")
        report = verify(sizes, numel=numel, dtype=args.dtype, op=args.op, input=args.input,
                        collective=args.collective, seed=args.seed, algorithm=args.algorithm, root=args.root)
    except (ValueError, TypeError, ImportError) as exc:
        parser.exit(2, f"ringlab verify: error: {exc}\n")
    print(report.to_json() if args.json else report.table())
    return 0 if report.ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
