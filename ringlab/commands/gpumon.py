"""``ringlab gpumon``: append per-GPU utilization and memory to a CSV log until told to stop.

Example: ``ringlab gpumon --interval 5 --out gpus.csv`` (Ctrl-C or SIGTERM ends it after the
tick in progress, which gets at most 2 s more, exit status 0). The log schema is documented in
:mod:`ringlab.labs.gpumon`. Exit status 2: bad options, a log file that is not a gpumon log, or
``--backend nvml`` without nvidia-ml-py; 1: the log could not be written (disk full, I/O error;
every tick written before is intact).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

from ringlab import cli_args, textfmt
from ringlab.labs import gpumon


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event):
    """Route SIGINT and SIGTERM to ``stop`` for the duration of the block (main thread only)."""
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: list[str]) -> int:
    parser = cli_args.ArgumentParser(
        prog="ringlab gpumon",
        description="Sample per-GPU utilization and memory into an append-only CSV log "
        "(schema: python -c 'import ringlab.labs.gpumon as g; help(g)').",
    )
    parser.add_argument("--interval", type=cli_args.duration(min=0.001, min_open=False, max=86400.0), default=5.0,
                        help="seconds between ticks, or with a unit: 500ms, 1min (default 5; from 1 ms to a day)")
    parser.add_argument("--out", required=True, type=cli_args.output_file,
                        help="CSV log to append to (created if missing)")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--count", type=cli_args.integer(min=1, max=10**9), help="stop after this many ticks")
    limit.add_argument("--duration", type=cli_args.duration(max=gpumon.MAX_SECONDS),
                       help="stop before the first tick due this many seconds after the start (e.g. 90, 8h)")
    parser.add_argument("--backend", choices=gpumon.BACKENDS, default="auto",
                        help="nvml (nvidia-ml-py), smi (nvidia-smi) or auto: nvml when it initialises, else smi")
    parser.add_argument("--smi-timeout", type=cli_args.duration(min=0.001, min_open=False, max=3600.0), default=None,
                        help="seconds before a silent nvidia-smi is killed and an error row written (default 10; "
                             "not with --backend nvml)")
    parser.add_argument("--nvml-timeout", type=cli_args.duration(min=0.001, min_open=False, max=3600.0), default=None,
                        help="seconds an NVML call may take before it is abandoned and an error row written "
                             "(default 10; not with --backend smi)")
    args = parser.parse_args(argv)
    for flag, unused_by in (("smi_timeout", "nvml"), ("nvml_timeout", "smi")):
        if getattr(args, flag) is not None and args.backend == unused_by:
            parser.error(f"--{flag.replace('_', '-')} does not apply to --backend {unused_by}, which never calls "
                         f"{'nvidia-smi' if unused_by == 'nvml' else 'NVML'}")
    timeouts = {flag: getattr(args, flag) for flag in ("smi_timeout", "nvml_timeout")
                if getattr(args, flag) is not None}  # else open_sampler's defaults

    try:
        sampler = gpumon.open_sampler(args.backend, **timeouts)
    except ImportError as exc:
        print(f"ringlab gpumon: {exc}", file=sys.stderr)
        return 2

    def notice(text: str) -> None:
        print(f"ringlab gpumon: {text}", file=sys.stderr, flush=True)

    try:
        log = gpumon.GpumonLog(args.out, on_notice=notice)
    except (ValueError, OSError) as exc:
        print(f"ringlab gpumon: error: {exc}", file=sys.stderr)
        sampler.close()
        return 2
    stop = threading.Event()
    if getattr(sampler, "note", ""):
        print(f"ringlab gpumon: {sampler.note}; using nvidia-smi", file=sys.stderr)
    print(textfmt.wrap(f"ringlab gpumon: sampling with {sampler.describe()} every {args.interval:g} s into "
                       f"{args.out}; Ctrl-C stops"), file=sys.stderr, flush=True)
    with log, _stop_on_signals(stop):
        try:
            ticks = gpumon.run(sampler, log, interval=args.interval, count=args.count, duration=args.duration, stop=stop)
        except gpumon.LogWriteError as exc:
            print(f"ringlab gpumon: error: {exc.strerror}; stopped after {exc.ticks} ticks, every one of them "
                  f"intact in {args.out}", file=sys.stderr)
            return 1
        finally:
            sampler.close()
    print(textfmt.wrap(f"ringlab gpumon: {ticks} ticks appended to {args.out}"), file=sys.stderr)
    return 0
