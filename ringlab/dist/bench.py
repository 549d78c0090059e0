"""Bandwidth benchmark in the nccl-tests way: torch.distributed's collective vs ringlab's ring.

For each message size S (bytes, doubling) every rank runs ``warmup`` untimed calls of each
implementation, a barrier, then ``iters`` timed calls of each: the library collective
(``dist.all_reduce``, ``dist.all_gather_single`` / ``all_gather_into_tensor``,
``dist.reduce_scatter_single`` / ``reduce_scatter_tensor``) and ringlab's ring version, in the
same processes, alternating call by call so that a machine whose load changes during the run
(shared CPUs) slows both alike; each call is timed to completion (``cuda.synchronize`` on GPU).
Time per call is averaged over the iterations and then over the ranks (nccl-tests ``-a 1``,
its default). Bandwidths follow nccl-tests' doc/PERFORMANCE.md:

* ``algbw = S / t``, S the full message: the all-reduce buffer, the gathered output of
  all-gather, the input of reduce-scatter;
* ``busbw = algbw * 2 (n - 1) / n`` for all_reduce and ``algbw * (n - 1) / n`` for all_gather
  and reduce_scatter, so it compares with the link bandwidth whatever the rank count.

GB/s here are decimal (1e9 B/s), as nccl-tests prints them. As in nccl-tests, all_gather and
reduce_scatter round the element count down to a multiple of the world size (at least one
element per rank), so the reported size can be below the requested one.
"""

from __future__ import annotations

import csv
import time
from dataclasses import asdict, dataclass

from .collectives import ring_all_gather, ring_all_reduce, ring_reduce_scatter, torch_modules
from .launch import launch

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64")
MiB = 2**20


def bus_factor(collective: str, world_size: int) -> float:
    """busbw / algbw: ``2 (n - 1) / n`` for all_reduce, ``(n - 1) / n`` for all_gather and reduce_scatter.

    Source: NVIDIA nccl-tests, doc/PERFORMANCE.md. Raises ValueError for other collectives or n < 1.
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}; got {collective!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return (2 if collective == "all_reduce" else 1) * (world_size - 1) / world_size


def message_sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """``min_bytes, 2 min_bytes, 4 min_bytes, ...`` up to ``max_bytes`` inclusive (nccl-tests ``-f 2``).

    Raises ValueError unless ``1 <= min_bytes <= max_bytes``.
    """
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ValueError(f"need 1 <= min_bytes <= max_bytes, got min_bytes={min_bytes}, max_bytes={max_bytes}")
    sizes, size = [], int(min_bytes)
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


@dataclass(frozen=True)
class BenchRow:
    """One message size: mean time per call (microseconds) of the library and of ringlab's ring."""

    collective: str
    world_size: int
    backend: str
    dtype: str
    size_bytes: int  # S, the full message
    count: int  # elements of S
    library_time_us: float
    ringlab_time_us: float

    def algbw(self, time_us: float) -> float:
        """``S / t`` in GB/s (1e9 B/s)."""
        return self.size_bytes / (time_us * 1e-6) / 1e9

    def busbw(self, time_us: float) -> float:
        """algbw times :func:`bus_factor`, GB/s (1e9 B/s)."""
        return self.algbw(time_us) * bus_factor(self.collective, self.world_size)

    @property
    def time_ratio(self) -> float:
        """ringlab time / library time (above 1: ringlab is slower)."""
        return self.ringlab_time_us / self.library_time_us

    def as_dict(self) -> dict:
        row = asdict(self)
        for who in ("library", "ringlab"):
            t = row[f"{who}_time_us"]
            row[f"{who}_algbw_GBps"] = self.algbw(t)
            row[f"{who}_busbw_GBps"] = self.busbw(t)
        row["time_ratio"] = self.time_ratio
        return row


def _count(collective: str, size_bytes: int, itemsize: int, world_size: int) -> int:
    count = max(1, size_bytes // itemsize)
    if collective != "all_reduce":
        count = max(world_size, count - count % world_size)
    return count


def _library(dist, collective: str):
    """The torch.distributed call for a collective (the ``*_single`` names where this torch has them)."""
    if collective == "all_reduce":
        return lambda out, inp: dist.all_reduce(out)
    if collective == "all_gather":
        return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def _ringlab(collective: str):
    if collective == "all_reduce":
        return lambda out, inp: ring_all_reduce(out, out=out)
    if collective == "all_gather":
        return lambda out, inp: ring_all_gather(inp, out=out)
    return lambda out, inp: ring_reduce_scatter(inp)


def bench_rank(collective: str, sizes: list[int], dtype: str, iters: int, warmup: int) -> list[tuple[float, float]]:
    """Run in every rank of an initialised group: ``[(library s/call, ringlab s/call)]`` per size.

    Usable under torchrun too (call it after ``init_process_group``); :func:`run_bench` launches it.
    """
    torch, dist = torch_modules()
    n = dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch_dtype = getattr(torch, dtype)
    itemsize = torch.empty(0, dtype=torch_dtype).element_size()
    library, ringlab = _library(dist, collective), _ringlab(collective)

    def timed(out, inp) -> tuple[float, float]:
        for _ in range(warmup):
            library(out, inp)
            ringlab(out, inp)
        sync()
        dist.barrier()
        total = [0.0, 0.0]
        for _ in range(iters):  # alternate call by call so that load drifting over time hits both alike
            for k, call in enumerate((library, ringlab)):
                start = time.perf_counter()
                call(out, inp)
                sync()
                total[k] += time.perf_counter() - start
        return total[0] / iters, total[1] / iters

    times = []
    for size in sizes:
        count = _count(collective, size, itemsize, n)
        # zeros: in-place all-reduce repeated many times stays finite
        full = torch.zeros(count, dtype=torch_dtype, device=device)
        part = torch.zeros(count // n if collective != "all_reduce" else 0, dtype=torch_dtype, device=device)
        out, inp = {"all_reduce": (full, full), "all_gather": (full, part), "reduce_scatter": (part, full)}[collective]
        times.append(timed(out, inp))
        del full, part
    return times


def run_bench(collective: str = "all_reduce", world_size: int = 2, backend: str = "gloo", min_bytes: int = 8,
              max_bytes: int = 256 * MiB, dtype: str = "float32", iters: int = 20, warmup: int = 5,
              timeout: float = 1800.0) -> list[BenchRow]:
    """Launch ``world_size`` local processes and benchmark one collective over ``message_sizes(min_bytes, max_bytes)``.

    Defaults follow nccl-tests (20 timed and 5 warm-up iterations, 8 B to 256 MiB, float32).
    Returns one :class:`BenchRow` per size, times averaged over ranks. Raises ValueError for
    bad arguments, :class:`~ringlab.dist.RankError` / :class:`~ringlab.dist.LaunchTimeout` from the launch.
    """
    bus_factor(collective, world_size)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if iters < 1 or warmup < 0:
        raise ValueError(f"need iters >= 1 and warmup >= 0, got iters={iters}, warmup={warmup}")
    sizes = message_sizes(min_bytes, max_bytes)
    per_rank = launch(bench_rank, world_size, backend=backend, timeout=timeout,
                      args=(collective, sizes, dtype, iters, warmup))
    torch, _ = torch_modules()
    itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    rows = []
    for i, size in enumerate(sizes):
        count = _count(collective, size, itemsize, world_size)
        lib = sum(r[i][0] for r in per_rank) / world_size
        ring = sum(r[i][1] for r in per_rank) / world_size
        rows.append(BenchRow(collective, world_size, backend, dtype, count * itemsize, count, lib * 1e6, ring * 1e6))
    return rows


def format_table(rows: list[BenchRow]) -> str:
    """An nccl-tests-like text table of ``rows`` (one collective, world size and backend)."""
    if not rows:
        return "(no sizes)"
    first = rows[0]
    lines = [
        f"# {first.collective}, world_size={first.world_size}, backend={first.backend}, dtype={first.dtype}; "
        "time in us, algbw and busbw in GB/s (1e9 B/s); ratio = ringlab time / library time",
        f"# {'':>24}  {'library (torch.distributed)':^30}  {'ringlab ring':^30}",
        f"# {'size(B)':>12} {'count':>11}  {'time(us)':>12} {'algbw':>8} {'busbw':>8}  "
        f"{'time(us)':>12} {'algbw':>8} {'busbw':>8}  {'ratio':>6}",
    ]
    for r in rows:
        lines.append(
            f"  {r.size_bytes:>12} {r.count:>11}  {r.library_time_us:>12.1f} {r.algbw(r.library_time_us):>8.3f} "
            f"{r.busbw(r.library_time_us):>8.3f}  {r.ringlab_time_us:>12.1f} {r.algbw(r.ringlab_time_us):>8.3f} "
            f"{r.busbw(r.ringlab_time_us):>8.3f}  {r.time_ratio:>6.2f}")
    return "\n".join(lines)


def write_csv(rows: list[BenchRow], path) -> None:
    """Write ``rows`` to ``path`` as CSV, one line per size, with algbw/busbw columns (GB/s, 1e9 B/s)."""
    dicts = [r.as_dict() for r in rows]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(dicts[0]) if dicts else list(BenchRow.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(dicts)
