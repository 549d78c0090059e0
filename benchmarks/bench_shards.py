"""The reference downloader against a throttled local server: wall time against the ideal, concurrency, memory.

64 shards of 16 MiB (1 GiB) are served by ``ringlab shards serve`` in its own process with every connection
capped at ``--rate`` (default 8 MiB/s) and fetched at K = 8 by :func:`ringlab.shards.fetch.fetch_checkpoint` in
this process. The peer is the ideal a perfect client reaches behind that server: every byte at the throttle
on all K connections at once, ``total bytes / (K * rate)``. Printed:

* wall time / ideal (target <= 1.2: per-request overhead, backoff-free scheduling, no slot left idle);
* peak concurrent connections seen by the server (target: exactly K) and connections left open (0);
* growth of this process's resident memory during the fetch, sampled every 20 ms (target < 64 MiB: the
  body is streamed to disk, never held whole).

Nothing here asserts a time. Usage: python benchmarks/bench_shards.py [--shards 64] [--shard-size 16MiB]
[--concurrency 8] [--rate 8MiB/s] [--dir DIR (keep the checkpoint between runs)]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from ringlab.calc.parsing import parse_bandwidth, parse_size
from ringlab.shards import INDEX_NAME, read_index, shard_files, write_checkpoint
from ringlab.shards.fetch import FetchOptions, fetch_checkpoint


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples :func:`rss_bytes` every ``interval`` s in a thread while the block runs."""

    def __init__(self, interval: float = 0.02):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()

    def _run(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self):
        self.base = self.peak = rss_bytes()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def checkpoint(folder: str, shards: int, shard_size: int) -> int:
    """Write the checkpoint unless ``folder`` already holds this one; return the bytes of its shard files."""
    index = os.path.join(folder, INDEX_NAME)
    if os.path.exists(index):
        names = shard_files(read_index(index))
        if len(names) == shards and all(os.path.getsize(os.path.join(folder, n)) > shard_size for n in names):
            return sum(os.path.getsize(os.path.join(folder, n)) for n in names)
    return write_checkpoint(folder, shards=shards, shard_size=shard_size, seed=0).total_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--shard-size", default="16MiB")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rate", default="8MiB/s", help="per-connection throttle of the server")
    parser.add_argument("--dir", default=None, help="checkpoint folder (default: a temporary one)")
    args = parser.parse_args()
    shard_size, rate = parse_size(args.shard_size), parse_bandwidth(args.rate)
    work = tempfile.mkdtemp(prefix="bench_shards_")
    folder = args.dir or os.path.join(work, "ckpt")
    try:
        started = time.perf_counter()
        total = checkpoint(folder, args.shards, shard_size)
        print(f"checkpoint: {args.shards} shards x {shard_size:,} B = {total:,} B in files "
              f"(written or reused in {time.perf_counter() - started:.1f} s)")
        records_path = os.path.join(work, "records.json")
        server = subprocess.Popen([sys.executable, "-m", "ringlab", "shards", "serve", "--dir", folder, "--faults",
                                   f"conn={rate:.0f}", "--records", records_path], stdout=subprocess.PIPE,
                                  text=True, stdin=subprocess.DEVNULL)
        url = server.stdout.readline().strip()
        options = FetchOptions(concurrency=args.concurrency, timeout=3600, read_timeout=60)
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        with PeakRSS() as memory:
            report = asyncio.run(fetch_checkpoint(url, os.path.join(work, "out"), options))
        after = resource.getrusage(resource.RUSAGE_SELF)
        client_cpu = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=60)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the server, start-up and hashing included
        with open(records_path) as fh:
            records = json.load(fh)
        ideal = total / (args.concurrency * rate)
        print(f"download ok: {report.ok} ({report.error or 'every shard verified'}), {report.bytes_received:,} B")
        print(f"wall time            {report.elapsed:8.2f} s")
        print(f"ideal (bytes/(K*r))  {ideal:8.2f} s   (peer: {total:,} B at {args.concurrency} x "
              f"{rate / 2**20:g} MiB/s)")
        print(f"ratio wall / ideal   {report.elapsed / ideal:8.3f}   (target <= 1.2)")
        print(f"peak connections     {records['peak_connections']:8d}     (target exactly {args.concurrency}); "
              f"open at the end: {records['open_connections']}")
        shards = [a for a in report.attempts if a.shard != INDEX_NAME]
        per_request = sum(a.end - a.start for a in shards) / len(shards)
        busy = sum(a.end - a.start for a in report.attempts)
        print(f"per request          {per_request:8.2f} s   (ideal {total / len(shards) / rate:.2f} s at the "
              f"throttle); "
              f"slots busy {busy / (args.concurrency * report.elapsed):.0%} of the wall time")
        server_cpu = children.ru_utime + children.ru_stime
        print(f"CPU                  {client_cpu:8.2f} s in the fetcher, {server_cpu:.2f} s in the "
              f"server process (a busy machine that cannot give them this in the ideal time stretches the run)")
        print(f"RSS growth           {(memory.peak - memory.base) / 2**20:8.1f} MiB (target < 64 MiB; "
              f"base {memory.base / 2**20:.0f} MiB)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
