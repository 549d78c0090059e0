"""Speed and peak memory of ``ringlab explain`` on a large nccl-tests table, against a plain line split.

The input is generated from a real fixture (``tests/fixtures/nccl/a100_sxm4_8gpu_nccl_tests_2_19.txt``):
its banner, device lines and column header, then its result rows repeated (as ``all_reduce_perf -N``
cycles print them) until the file reaches ``--mb`` megabytes, then its footer. Each reader runs in
its own child process so that its peak resident memory (``ru_maxrss``) is its own:

* ``ringlab explain FILE --json > /dev/null`` (import time excluded: the child times the call);
* the peer: ``for line in open(FILE, 'rb'): line.split()``, the least any line reader must do.

Printed, per reader: MB/s of wall time and of CPU time (decimal MB = 1e6 bytes; CPU time, user and
system, is the steadier of the two on a machine other jobs share), each child's peak RSS in MiB, and
explain's throughput as a fraction of the line split's. With ``--repeat N`` the readers alternate N
times and each figure is the median. Nothing here asserts a time; run it by hand:
``python benchmarks/bench_explain.py [--mb 200] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "nccl" / "a100_sxm4_8gpu_nccl_tests_2_19.txt"

_CHILD = """
import json, resource, sys, time
path, what = sys.argv[1], sys.argv[2]
if what == "explain":
    import io, contextlib
    from ringlab.commands.explain import main
start, cpu = time.perf_counter(), time.process_time()
if what == "explain":
    with contextlib.redirect_stdout(io.StringIO()):
        code = main([path, "--json"])
else:
    tokens, code = 0, 0
    with open(path, "rb") as fh:
        for line in fh:
            tokens += len(line.split())
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu": cpu, "code": code,
                  "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def make_table(path: Path, megabytes: float) -> int:
    """Write the generated table to ``path``; return its size in bytes."""
    lines = FIXTURE.read_text().splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if line.strip()[:1].isdigit()]
    head, body, tail = lines[:rows[0]], "".join(lines[rows[0]:rows[-1] + 1]), "".join(lines[rows[-1] + 1:])
    target = int(megabytes * 1e6)
    with open(path, "w") as fh:
        fh.write("".join(head))
        written = sum(len(x) for x in head)
        while written < target:
            fh.write(body)
            written += len(body)
        fh.write(tail)
    return path.stat().st_size


def measure(path: Path, what: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), what], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0, help="size of the generated table in MB (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each reader, alternating (default 3)")
    args = parser.parse_args()
    readers = ("explain", "line split")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big_all_reduce.txt"
        size = make_table(path, args.mb)
        runs = {what: [] for what in readers}
        for _ in range(args.repeat):
            for what in readers:
                runs[what].append(measure(path, what))
        median = {what: {key: statistics.median(r[key] for r in runs[what]) for key in ("seconds", "cpu", "peak_kib")}
                  for what in readers}
        for what in readers:
            m = median[what]
            print(f"{what:<12} {size / 1e6 / m['seconds']:7.1f} MB/s wall {size / 1e6 / m['cpu']:7.1f} MB/s CPU  "
                  f"peak RSS {m['peak_kib'] / 1024:7.1f} MiB  (exit {runs[what][0]['code']})")
        wall = median["line split"]["seconds"] / median["explain"]["seconds"]
        cpu = median["line split"]["cpu"] / median["explain"]["cpu"]
        print(f"input {size / 1e6:,.1f} MB; explain runs at {wall:.2f}x the line split's speed (wall), "
              f"{cpu:.2f}x (CPU)")
        os.remove(path)


if __name__ == "__main__":
    main()
