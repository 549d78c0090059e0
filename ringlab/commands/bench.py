"""``ringlab bench``: nccl-tests' bandwidth report for torch.distributed's collective and for ringlab's ring.

Starts ``--world-size`` local processes (gloo on CPU, nccl on GPUs), or, when started by torchrun
(``torchrun --nnodes K --nproc-per-node G -m ringlab bench ...``; RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT set), joins torchrun's env:// rendezvous across machines, with nccl
when the process sees a GPU and gloo otherwise. Times both implementations out-of-place and
in-place for sizes doubling from ``--min-bytes`` to ``--max-bytes``, checks their results
(``#wrong``), and prints nccl-tests' table (time, algbw and busbw in GB/s = 1e9 B/s, nccl-tests
doc/PERFORMANCE.md), one per implementation; ``ringlab explain`` reads it. Under torchrun rank 0
prints and writes ``--csv``.

Before any process starts it checks that ``--csv`` can be written and that the machine can run
``--world-size`` ranks with ``--max-bytes`` buffers (:func:`ringlab.dist.max_local_ranks`).
SIGTERM or Ctrl-C kills every rank and exits with 128 + the signal number.
"""

from __future__ import annotations

import argparse
import os
import sys

from ringlab import cli_args
from ringlab.dist import LaunchInterrupted, LaunchTimeout, RankError, max_local_ranks
from ringlab.dist.bench import (
    COLLECTIVES,
    DTYPES,
    format_table,
    run_bench,
    run_bench_torchrun,
    torchrun_environment,
    write_csv,
)

MAX_MESSAGE_BYTES = 2**36  # 64 GiB: beyond any one host's collective buffers


def build_parser() -> argparse.ArgumentParser:
    p = cli_args.ArgumentParser(prog="ringlab bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collective", default="all_reduce", choices=COLLECTIVES)
    p.add_argument("--world-size", type=cli_args.integer(min=1, max=4096), default=None,
                   help="number of local processes (default 2; at most what the machine can run); "
                        "under torchrun it is torchrun's WORLD_SIZE")
    p.add_argument("--backend", default=None, choices=("gloo", "nccl"),
                   help="default: gloo for local processes; under torchrun nccl when a GPU is visible, else gloo")
    p.add_argument("--min-bytes", type=cli_args.size(max=MAX_MESSAGE_BYTES), default=8,
                   help="smallest message S, e.g. 8, 1KiB, 1MB (default 8)")
    p.add_argument("--max-bytes", type=cli_args.size(max=MAX_MESSAGE_BYTES), default=256 * 2**20,
                   help="largest message S (default 256MiB); sizes double")
    p.add_argument("--dtype", default="float32", choices=DTYPES)
    p.add_argument("--iters", type=cli_args.integer(min=1, max=10**6), default=20,
                   help="timed calls per size and implementation (default 20)")
    p.add_argument("--warmup", type=cli_args.integer(min=0, max=10**6), default=5, help="untimed calls first (default 5)")
    p.add_argument("--timeout", type=cli_args.duration(max=7 * 86400.0), default=1800.0,
                   help="seconds for the whole run, or with a unit: 30min (default 1800; at most a week)")
    p.add_argument("--csv", metavar="PATH", type=cli_args.output_file,
                   help="also write the rows to this CSV file (checked before the run)")
    return p


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.min_bytes > args.max_bytes:
            raise ValueError(f"need --min-bytes <= --max-bytes (min_bytes={args.min_bytes:,}, "
                             f"max_bytes={args.max_bytes:,})")
        env = torchrun_environment()
        if env is not None:
            if args.world_size is not None and args.world_size != int(env["WORLD_SIZE"]):
                raise ValueError(f"--world-size {args.world_size} under torchrun, whose WORLD_SIZE is "
                                 f"{env['WORLD_SIZE']}: leave --world-size out (torchrun sets it)")
            result = run_bench_torchrun(args.collective, args.backend, args.min_bytes, args.max_bytes, args.dtype,
                                        args.iters, args.warmup, args.timeout)
            if result is None:  # not rank 0: rank 0 prints for everyone
                return 0
        else:
            backend, world_size = args.backend or "gloo", args.world_size or 2
            limit = max_local_ranks(backend, args.max_bytes)
            if world_size > limit:
                raise ValueError(f"--world-size {world_size}: this machine can run at most {limit} ranks with --backend "
                                 f"{backend} and {args.max_bytes:,}-byte messages (cores, GPUs and available memory)")
            result = run_bench(args.collective, world_size, backend, args.min_bytes, args.max_bytes,
                               args.dtype, args.iters, args.warmup, args.timeout)
        rows, devices = result
    except (ValueError, TypeError, ImportError) as exc:
        print(f"ringlab bench: error: {exc}", file=sys.stderr)
        return 2
    except (RankError, LaunchTimeout) as exc:
        print(f"ringlab bench: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # under torchrun: torch.distributed's own failures (rendezvous, a peer gone)
        print(f"ringlab bench: rank {os.environ.get('RANK', '?')}: {str(exc).splitlines()[0] if str(exc) else exc!r}",
              file=sys.stderr)
        return 1
    except LaunchInterrupted as exc:
        print(f"ringlab bench: {exc}", file=sys.stderr)
        return 128 + exc.signum
    print(format_table(rows, devices, args.min_bytes, args.max_bytes, args.iters, args.warmup))
    if args.csv:
        try:
            write_csv(rows, args.csv)
        except OSError as exc:
            print(f"ringlab bench: error: --csv {args.csv}: {exc.strerror or exc} (the table is above)",
                  file=sys.stderr)
            return 1
        print(f"# wrote {len(rows)} rows to {args.csv}")
    return 0
