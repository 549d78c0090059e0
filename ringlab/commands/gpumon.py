"""``ringlab gpumon``: append per-GPU utilization and memory to a CSV log until told to stop.

Example: ``ringlab gpumon --interval 5 --out gpus.csv`` (Ctrl-C or SIGTERM ends it after the
tick in progress, exit status 0). The log schema is documented in :mod:`ringlab.labs.gpumon`.
Exit status 2: bad options, a log file that is not a gpumon log, or ``--backend nvml``
without nvidia-ml-py.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from ringlab.labs import gpumon


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number of seconds > 0")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 1")
    return value


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
    parser = argparse.ArgumentParser(
        prog="ringlab gpumon",
        description="Sample per-GPU utilization and memory into an append-only CSV log "
        "(schema: python -c 'import ringlab.labs.gpumon as g; help(g)').",
    )
    parser.add_argument("--interval", type=_seconds, default=5.0, help="seconds between ticks (default 5)")
    parser.add_argument("--out", required=True, help="CSV log to append to (created if missing)")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--count", type=_count, help="stop after this many ticks")
    limit.add_argument("--duration", type=_seconds, help="stop before the first tick due this many seconds after the start")
    parser.add_argument("--backend", choices=gpumon.BACKENDS, default="auto",
                        help="nvml (nvidia-ml-py), smi (nvidia-smi) or auto: nvml when it initialises, else smi")
    parser.add_argument("--smi-timeout", type=_seconds, default=10.0,
                        help="seconds before a silent nvidia-smi is killed and an error row written (default 10)")
    args = parser.parse_args(argv)

    try:
        sampler = gpumon.open_sampler(args.backend, args.smi_timeout)
    except ImportError as exc:
        print(f"ringlab gpumon: {exc}", file=sys.stderr)
        return 2
    try:
        log = gpumon.GpumonLog(args.out)
    except (ValueError, OSError) as exc:
        print(f"ringlab gpumon: {exc}", file=sys.stderr)
        sampler.close()
        return 2
    stop = threading.Event()
    if getattr(sampler, "note", ""):
        print(f"ringlab gpumon: {sampler.note}; using nvidia-smi", file=sys.stderr)
    print(f"ringlab gpumon: sampling with {sampler.describe()} every {args.interval:g} s into {args.out}; "
          "Ctrl-C stops", file=sys.stderr, flush=True)
    with log, _stop_on_signals(stop):
        try:
            ticks = gpumon.run(sampler, log, interval=args.interval, count=args.count, duration=args.duration, stop=stop)
        finally:
            sampler.close()
    print(f"ringlab gpumon: {ticks} ticks appended to {args.out}", file=sys.stderr)
    return 0
