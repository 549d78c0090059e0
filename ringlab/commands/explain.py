"""``ringlab explain``: read nccl-tests output and NCCL_DEBUG logs; say what ran and what it should reach.

    ringlab explain run.txt [nccl.log ...] [--json] [--plot busbw.png] [--nics 8 --nic-gbps 400]
    mpirun ... all_reduce_perf ... | ringlab explain -

All files are read together: a table in one file and its NCCL_DEBUG_FILE logs in others describe one
run. Files are streamed (a table of any length in bounded memory); only regular files and stdin are
read (a FIFO or a device is refused: it could block or never end). Exit codes: 0 read and explained; 1 a correctness failure (#wrong > 0) was found; 2 usage error
or an input that is not nccl-tests output, nccl-tests/rccl-tests JSON or an NCCL log (the message
names the line). The model and its sources are in :mod:`ringlab.nccl`.
"""

from __future__ import annotations

import argparse

from ringlab import cli_args, textfmt
from ringlab.nccl import ParseError, explain
from ringlab.nccl.reader import read_paths
from ringlab.viz._mpl import pyplot
from ringlab.viz.nccl import plot_busbw


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``ringlab explain``."""
    p = cli_args.ArgumentParser(prog="ringlab explain", description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", metavar="FILE", type=cli_args.text(),
                   help="nccl-tests output, -J JSON, or NCCL log; '-' for stdin")
    p.add_argument("--json", action="store_true", help="print JSON (an object, or a list when several runs)")
    p.add_argument("--plot", metavar="PNG", type=cli_args.figure_file,
                   help="draw busbw against message size with the ceiling (matplotlib)")
    p.add_argument("--nics", type=cli_args.integer(min=1, max=1024), help="NICs in use per node, for the multi-node ceiling")
    p.add_argument("--nic-gbps", type=cli_args.real(min=1, max=100_000),
                   help="line rate per NIC in Gb/s (bits) as sold (400 for NDR = 50 GB/s), multi-node ceiling")
    return p


def plot(reports, path: str) -> None:
    """Save :func:`ringlab.viz.nccl.plot_busbw` of ``reports`` as a PNG at ``path``."""
    fig = plot_busbw(reports)
    fig.savefig(path, dpi=100)
    pyplot().close(fig)


def main(argv: list[str]) -> int:
    """Run ``ringlab explain`` on ``argv``; return 0, 1 (correctness failure) or exit with 2 (usage, unreadable input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.files.count("-") > 1:
        parser.exit(2, "ringlab explain: error: stdin ('-') can be given once\n")
    try:
        reports = explain(read_paths(args.files), nics=args.nics, nic_gbps=args.nic_gbps)
    except OSError as exc:
        parser.exit(2, f"ringlab explain: error: {exc.filename or ''}: {exc.strerror or exc}\n")
    except (ParseError, ValueError, TypeError) as exc:
        parser.exit(2, f"ringlab explain: error: {exc}\n")
    if args.json:
        data = [r.as_dict() for r in reports]
        print(cli_args.json_text(data[0] if len(data) == 1 else data))
    else:
        print("\n\n".join(r.text(textfmt.WIDTH) for r in reports))
    if args.plot:
        try:
            plot(reports, args.plot)
        except (OSError, ImportError) as exc:
            parser.exit(2, f"ringlab explain: error: --plot: {exc}\n")
    return 1 if any(r.correctness_failure for r in reports) else 0
