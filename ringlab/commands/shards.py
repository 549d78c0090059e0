"""``ringlab shards write | serve | fetch``: a sharded checkpoint, a fault-injecting server for it, and the
reference downloader (topic 19).

    ringlab shards write --dir ckpt --shards 8 --shard-size 16MiB --seed 0
    ringlab shards serve --dir ckpt --faults '2#1=status:503:1; 3=reset:0.5' --port 0 --records rec.json
    ringlab shards fetch http://127.0.0.1:PORT/model.safetensors.index.json --dest out --concurrency 4 --timeout 60

Exit status: 0 done; 1 the download failed (one line: the shard and the reason; with ``--json`` the report
is still printed) or the server could not start; 2 a usage error (one line); 130 interrupted (Ctrl-C), after
the clean-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from urllib.parse import urlsplit

from ringlab import cli_args, textfmt
from ringlab.shards.checkpoint import MAX_SHARDS, write_checkpoint
from ringlab.shards.server import ShardServer

# name -> (module, function taking argv and returning an exit code, one-line summary)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "write": ("ringlab.commands.shards", "write_main", "write a small sharded safetensors checkpoint with its index"),
    "serve": ("ringlab.commands.shards", "serve_main", "serve a checkpoint folder on 127.0.0.1 with scripted faults"),
    "fetch": ("ringlab.commands.shards", "fetch_main",
              "download a sharded checkpoint: K connections, deadline, retries"),
}
FAULTS_HELP = ("rules separated by ';': SELECTOR=FAULT with SELECTOR a shard number, file name or *, optionally "
               "#A, #A-B, #A- (which requests) or ?P (probability); FAULT latency:DURATION, throttle:RATE, "
               "stall:F[:DURATION], reset:F, truncate:F, corrupt:F, status:CODE[:RETRY_AFTER] (F: fraction of the "
               "body); or conn=RATE, link=RATE, busy=K:RATE. Example: '2#1=status:503:1; 3=reset:0.5; conn=8MiB/s'")


def _usage() -> str:
    width = max(len(name) for name in SUBCOMMANDS)
    lines = ["usage: ringlab shards <write|serve|fetch> [options]", "", "subcommands:"]
    lines += [textfmt.wrap(summary, f"  {name:<{width}}  ", first_line_only=True)
              for name, (_, _, summary) in SUBCOMMANDS.items()]
    lines += ["", "Run 'ringlab shards <subcommand> --help' for its options."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Dispatch ``ringlab shards <subcommand> ...`` to the function registered in ``SUBCOMMANDS``."""
    return cli_args.dispatch("ringlab shards", SUBCOMMANDS, argv, usage=_usage())


def _error(prog: str, text: str, code: int) -> int:
    print(f"{prog}: error: {' '.join(str(text).split())}", file=sys.stderr)
    return code


def _folder_to_write(value: str) -> str:
    """A folder that exists or can be created (its nearest existing parent is a writable folder)."""
    path = cli_args.text()(value)
    if os.path.exists(path) and not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path!r} is a file; give a folder")
    parent = os.path.abspath(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write into {path!r}: {parent!r} is not a writable folder")
    return path


def _index_url(value: str) -> str:
    url = cli_args.text()(value)
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{url[:80]!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{url[:80]!r}: give an http:// or https:// URL of a "
                                         "model.safetensors.index.json")
    del port
    return url


def write_main(argv: list[str]) -> int:
    p = cli_args.ArgumentParser(prog="ringlab shards write",
                                description="Write a sharded safetensors checkpoint of seeded float32 tensors "
                                            "and its model.safetensors.index.json.")
    p.add_argument("--dir", required=True, type=_folder_to_write, help="folder to write into (created if missing)")
    p.add_argument("--shards", required=True, type=cli_args.integer(min=1, max=MAX_SHARDS), help="number of shards")
    p.add_argument("--shard-size", required=True, type=cli_args.size(min=4, max=2**30),
                   help="bytes of tensor data per shard, a multiple of 4, at most 1GiB (a shard is built in "
                        "memory): 16MiB, 1MB, 4096")
    p.add_argument("--seed", type=cli_args.integer(min=0, max=2**63 - 1), default=0, help="RNG seed (default 0)")
    args = p.parse_args(argv)
    if args.shard_size % 4:
        p.error(f"argument --shard-size: {args.shard_size:,} bytes is not a whole number of float32 elements "
                "(a multiple of 4)")
    if args.shards * args.shard_size > 2**36:
        p.error(f"argument --shard-size: {args.shards:,} shards of {args.shard_size:,} bytes is over 64 GiB; "
                "this writes test checkpoints")
    try:
        ckpt = write_checkpoint(args.dir, shards=args.shards, shard_size=args.shard_size, seed=args.seed)
    except OSError as exc:
        return _error(p.prog, f"cannot write {args.dir!r}: {exc.strerror or exc}", 1)
    except MemoryError:
        return _error(p.prog, f"not enough memory to build a shard of {args.shard_size:,} bytes; give a smaller "
                              "--shard-size", 1)
    print(ckpt.index_path)
    print(f"{len(ckpt.files)} shards, {ckpt.total_bytes:,} bytes in files, total_size {ckpt.total_size:,} "
          f"(seed {args.seed})", file=sys.stderr)
    return 0


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event):
    """SIGINT and SIGTERM set ``stop`` for the duration of the block (main thread only; elsewhere nothing
    changes). Installed even where the parent left SIGINT ignored (a shell's background job): the server's
    contract is to stop on Ctrl-C."""
    try:
        previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def serve_main(argv: list[str]) -> int:
    p = cli_args.ArgumentParser(prog="ringlab shards serve",
                                description="Serve a checkpoint folder on 127.0.0.1 with scripted, seeded faults; "
                                            "print the index URL, serve until Ctrl-C (or --duration).")
    p.add_argument("--dir", required=True, type=cli_args.text(), help="folder holding model.safetensors.index.json")
    p.add_argument("--faults", type=cli_args.text(), default=None, help=FAULTS_HELP)
    p.add_argument("--port", type=cli_args.integer(min=0, max=65535), default=0, help="TCP port (default 0: any free)")
    p.add_argument("--seed", type=cli_args.integer(min=0, max=2**63 - 1), default=0,
                   help="seed of the ?P fault draws (default 0)")
    p.add_argument("--records", type=cli_args.output_file, default=None,
                   help="write what the server saw (connections, requests, bytes) to this JSON file on exit")
    p.add_argument("--duration", type=cli_args.duration(max=86400.0), default=None,
                   help="stop after this many seconds (default: serve until Ctrl-C or SIGTERM)")
    args = p.parse_args(argv)
    try:
        server = ShardServer(args.dir, args.faults or "", port=args.port, seed=args.seed)
    except ValueError as exc:  # a bad SPEC names its rule ("fault '...'"); anything else is about the folder
        p.error(f"argument {'--faults' if str(exc).startswith('fault ') else '--dir'}: {exc}")
    except OSError as exc:
        p.error(f"argument --dir: cannot read {args.dir!r}: {exc.strerror or exc}")
    stop = threading.Event()
    end = None if args.duration is None else time.monotonic() + args.duration
    with _stop_on_signals(stop):  # before the URL is out: a client may signal as soon as it reads it
        try:
            server.start()
        except OSError as exc:
            return _error(p.prog, f"cannot listen on 127.0.0.1:{args.port} (--port): {exc.strerror or exc}", 1)
        try:
            print(server.index_url, flush=True)
            until = f"for {args.duration:g} s (--duration)" if args.duration else "until Ctrl-C"
            print(textfmt.wrap(f"{p.prog}: {len(server.files)} shards from {args.dir}, {until}; faults (seed "
                               f"{args.seed}): {server.plan.describe()}"), file=sys.stderr, flush=True)
            while not stop.is_set() and (end is None or time.monotonic() < end):
                stop.wait(0.2 if end is None else min(0.2, max(0.0, end - time.monotonic())))
        finally:
            server.stop()
    interrupted = stop.is_set()
    records = server.records
    if args.records:
        with open(args.records, "w", encoding="utf-8") as fh:
            fh.write(cli_args.json_text(records.to_dict()) + "\n")
    print(textfmt.wrap(f"{p.prog}: {'interrupted; ' if interrupted else ''}{len(records.requests)} requests on "
                       f"{sum(not c.foreign for c in records.connections)} connections, at most {records.peak_connections} open at once"),
          file=sys.stderr)
    return 0


def _fetch_text(report) -> str:
    shards = report.shards
    verified = sum(s.verified for s in shards)
    retries = sum(max(0, s.attempts - 1) for s in shards)
    return (f"fetched {len(shards)} shards, {sum(s.size or 0 for s in shards):,} bytes, into {report.dest} in "
            f"{report.elapsed:.2f} s with at most {report.peak_slots} connections; {verified} of {len(shards)} "
            f"verified against X-Linked-Etag; {retries} {'retry' if retries == 1 else 'retries'}")


def fetch_main(argv: list[str]) -> int:
    p = cli_args.ArgumentParser(prog="ringlab shards fetch",
                                description="Download every shard a model.safetensors.index.json names (URLs relative "
                                            "to it) with at most K connections, a deadline, retries with backoff and "
                                            "resume; verify each against X-Linked-Etag; exit 0 only when all are.")
    p.add_argument("index_url", metavar="INDEX_URL", type=_index_url, help="URL of model.safetensors.index.json")
    p.add_argument("--dest", required=True, type=_folder_to_write, help="folder to download into (created if missing)")
    p.add_argument("--concurrency", required=True, type=cli_args.integer(min=1, max=1024),
                   help="K: most shards, and TCP connections, at once (1 to 1,024)")
    p.add_argument("--timeout", required=True, type=cli_args.duration(max=7 * 86400.0),
                   help="overall deadline in seconds for the whole download (or 500ms, 10min)")
    p.add_argument("--retries", type=cli_args.integer(min=0, max=100), default=4,
                   help="retries per shard after its first attempt, on 5xx, 429, resets and timeouts (default 4)")
    p.add_argument("--read-timeout", type=cli_args.duration(max=86400.0), default=None,
                   help="longest silence while reading one response, seconds (default: 10 or a quarter of --timeout, "
                        "whichever is smaller)")
    p.add_argument("--json", action="store_true", help="print the report (shards, every attempt) as JSON")
    args = p.parse_args(argv)
    from ringlab.shards.fetch import FetchOptions, fetch_checkpoint

    read_timeout = args.read_timeout or min(10.0, args.timeout / 4)
    options = FetchOptions(concurrency=args.concurrency, timeout=args.timeout, retries=args.retries,
                           connect_timeout=min(10.0, args.timeout), read_timeout=read_timeout,
                           progress=sys.stderr.isatty() and not args.json)

    async def run():
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no signals here
            pass
        try:
            return await fetch_checkpoint(args.index_url, args.dest, options)
        finally:
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.remove_signal_handler(signal.SIGTERM)

    try:
        report = asyncio.run(run())
    except asyncio.CancelledError:  # SIGTERM: cleaned up like Ctrl-C
        print(f"{p.prog}: terminated; in-flight requests cancelled, no partial file left", file=sys.stderr)
        return 143
    except OSError as exc:
        return _error(p.prog, f"cannot write into {args.dest!r}: {exc.strerror or exc}", 1)
    if args.json:
        print(cli_args.json_text(report.to_dict()))
    if not report.ok:  # one stderr line, the shard and the reason (what scripts grep); the detail on stdout
        error = report.error
        if error.detail and not args.json:  # --json carries it in the document
            print(textfmt.wrap(f"{error.shard}: {error.detail}", "", "  "))
        print(f"{p.prog}: error: {error.shard}: {error.reason}", file=sys.stderr)
        return 1
    if not args.json:
        print(textfmt.wrap(_fetch_text(report)))
    return 0
