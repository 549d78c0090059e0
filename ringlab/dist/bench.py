"""Bandwidth benchmark in the nccl-tests way: torch.distributed's collective vs ringlab's ring.

For each message size S (bytes, doubling) every rank first checks each implementation once
out-of-place and once in-place on known data (nccl-tests' ``#wrong``: elements that differ from
the closed-form result by more than the dtype's rounding), then runs ``warmup`` untimed calls, a
barrier, and ``iters`` timed calls of each implementation and placement: the library collective
(``dist.all_reduce``, ``all_gather_into_tensor``, ``reduce_scatter_tensor``) and ringlab's ring
(:mod:`ringlab.dist.executor`), in the same processes, alternating call by call so that a
machine whose load changes during the run (shared CPUs) slows both alike; each call is timed to
completion (``cuda.synchronize`` on GPU). Time per call is averaged over the iterations and then
over the ranks (nccl-tests ``-a 1``, its default).

Placement as in nccl-tests: out-of-place reads one buffer and writes another; in-place, the
all-gather input is the rank's own slot of the output and the reduce-scatter output is the rank's
own slot of the input. torch.distributed has no out-of-place all_reduce, so that half copies the
input into the output first (ringlab's ``out=`` does the same copy).

Bandwidths follow nccl-tests' doc/PERFORMANCE.md through :mod:`ringlab.collectives.cost`
(``algbw = S / t``, ``busbw = algbw x bus_factor``), S the full message: the all-reduce buffer,
the gathered output of all-gather, the input of reduce-scatter. GB/s are decimal (1e9 B/s), as
nccl-tests prints them. As in nccl-tests, all_gather and reduce_scatter round the element count
down to a multiple of the world size (at least one element per rank).

:func:`format_table` prints the result as nccl-tests does (device lines, the column block,
``# Avg bus bandwidth``), one table per implementation, so ``ringlab explain`` reads it.
"""

from __future__ import annotations

import csv
import datetime
import os
import platform
import socket
import time
from dataclasses import asdict, dataclass

from ringlab.collectives.cost import bus_factor
from ringlab.collectives.registry import check_collective

from .executor import run_ring_all_gather, run_ring_all_reduce, run_ring_reduce_scatter, torch_modules
from .launch import launch

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64")
# nccl-tests' names of the data types (src/common.cu test_typenames)
NCCL_TESTS_TYPES = {"float32": "float", "float16": "half", "bfloat16": "bfloat16", "float64": "double",
                    "int32": "int32", "int64": "int64"}
IMPLEMENTATIONS = {"library": "torch.distributed", "ringlab": "ringlab ring"}
# torchrun's environment (env:// rendezvous): present in every process it starts
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
MiB = 2**20


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
    """One message size: mean time per call (microseconds) of the library and of ringlab's ring.

    ``*_time_us`` are out-of-place, ``*_in_place_us`` in-place; ``*_wrong`` count the elements of
    the checked call that differed from the exact result (nccl-tests' ``#wrong``).
    """

    collective: str
    world_size: int
    backend: str
    dtype: str
    size_bytes: int  # S, the full message
    count: int  # elements of S
    library_time_us: float
    ringlab_time_us: float
    library_in_place_us: float | None = None
    ringlab_in_place_us: float | None = None
    library_wrong: int = 0
    library_in_place_wrong: int = 0
    ringlab_wrong: int = 0
    ringlab_in_place_wrong: int = 0

    def algbw(self, time_us: float) -> float:
        """``S / t`` in GB/s (1e9 B/s)."""
        return self.size_bytes / (time_us * 1e-6) / 1e9

    def busbw(self, time_us: float) -> float:
        """algbw times nccl-tests' factor (:func:`ringlab.collectives.cost.bus_factor`), GB/s (1e9 B/s)."""
        return self.algbw(time_us) * bus_factor(self.collective, self.world_size)

    @property
    def time_ratio(self) -> float:
        """ringlab time / library time, out-of-place (above 1: ringlab is slower)."""
        return self.ringlab_time_us / self.library_time_us

    def as_dict(self) -> dict:
        row = asdict(self)
        for who in IMPLEMENTATIONS:
            for half in ("time_us", "in_place_us"):
                t = row[f"{who}_{half}"]
                tag = "" if half == "time_us" else "_in_place"
                row[f"{who}{tag}_algbw_GBps"] = None if t is None else self.algbw(t)
                row[f"{who}{tag}_busbw_GBps"] = None if t is None else self.busbw(t)
        row["time_ratio"] = self.time_ratio
        return row


def _count(collective: str, size_bytes: int, itemsize: int, world_size: int) -> int:
    count = max(1, size_bytes // itemsize)
    if collective != "all_reduce":
        count = max(world_size, count - count % world_size)
    return count


def _library(dist, collective: str):
    """The torch.distributed call ``(out, inp)`` of a collective (the ``*_single`` names where this torch has them)."""
    if collective == "all_reduce":
        def all_reduce(out, inp):
            if out.data_ptr() != inp.data_ptr():
                out.copy_(inp)
            dist.all_reduce(out)
        return all_reduce
    if collective == "all_gather":
        return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def _ringlab(collective: str):
    """ringlab's ring ``(out, inp)``, writing into ``out`` as the library call does."""
    if collective == "all_reduce":
        return lambda out, inp: run_ring_all_reduce(inp, out=out)
    if collective == "all_gather":
        return lambda out, inp: run_ring_all_gather(inp, out=out)
    return lambda out, inp: out.copy_(run_ring_reduce_scatter(inp).output)


def _buffers(torch, collective: str, count: int, rank: int, n: int, dtype, device):
    """``{placement: (out, inp)}`` for out-of-place and in-place (own slot of the larger buffer)."""
    shard = count // n
    slot = slice(rank * shard, (rank + 1) * shard)
    full = [torch.zeros(count, dtype=dtype, device=device) for _ in range(2)]
    part = torch.zeros(shard, dtype=dtype, device=device)
    if collective == "all_reduce":
        return {"out_of_place": (full[0], full[1]), "in_place": (full[0], full[0])}
    if collective == "all_gather":
        return {"out_of_place": (full[0], part), "in_place": (full[1], full[1][slot])}
    return {"out_of_place": (part, full[0]), "in_place": (full[1][slot], full[1])}


def _pattern(torch, numel: int, start: int, device):
    """The check data's shape in the element index: 1, 2, 3, 1, 2, 3, ... (small integers: exact sums)."""
    return (torch.arange(start, start + numel, device=device, dtype=torch.float64) % 3) + 1


def _count_wrong(torch, collective: str, out, inp, rank: int, n: int, call, sync) -> int:
    """Fill ``inp`` with rank-scaled known values, run ``call`` once, count elements off the exact result.

    Rank r sends ``(r + 1) * pattern``; all_reduce and reduce_scatter then hold ``n (n + 1) / 2 * pattern``,
    all_gather holds ``(owner + 1) * pattern`` in each rank's slot. Floats may differ by the dtype's
    rounding of ``n`` additions (``n * eps`` relative); integers must match exactly.
    """
    shard = inp.numel() if collective == "all_gather" else out.numel()
    start = rank * shard if collective != "all_reduce" else 0
    own = _pattern(torch, inp.numel(), start if collective == "all_gather" else 0, inp.device)
    inp.copy_((rank + 1) * own)
    sync()
    call(out, inp)
    sync()
    if collective == "all_gather":
        owners = torch.arange(out.numel(), device=out.device) // shard
        expected = (owners + 1) * _pattern(torch, out.numel(), 0, out.device)
    else:
        expected = n * (n + 1) / 2 * _pattern(torch, out.numel(), start, out.device)
    got = out.to(torch.float64)
    if out.dtype.is_floating_point:
        tol = torch.finfo(out.dtype).eps * n * expected.abs()
        return int(((got - expected).abs() > tol).sum())
    return int((got != expected).sum())


def device_info() -> dict:
    """This rank's nccl-tests device line fields: rank, pid, host, node (torchrun's GROUP_RANK), device, bus id, name."""
    torch, dist = torch_modules()
    info = {"rank": dist.get_rank(), "pid": os.getpid(), "host": socket.gethostname(),
            "node": int(os.environ.get("GROUP_RANK", "0")), "device": int(os.environ.get("LOCAL_RANK", "0"))}
    if dist.get_backend() == "nccl":
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        bus = [getattr(props, f"pci_{k}_id", None) for k in ("domain", "bus", "device")]
        info.update(device=index, name=props.name,
                    bus=f"{bus[0]:04x}:{bus[1]:02x}:{bus[2]:02x}" if None not in bus else f"cuda:{index}")
    else:
        info.update(bus="cpu", name=f"CPU {platform.machine() or 'unknown'} (gloo)")
    return info


def bench_rank(collective: str, sizes: list[int], dtype: str, iters: int, warmup: int) -> dict:
    """Run in every rank of an initialised group; returns this rank's ``device`` info and, per size,
    ``times`` ``{impl: {placement: s/call}}`` and ``wrong`` ``{impl: {placement: count}}``.

    Usable under torchrun (call it after ``init_process_group``); :func:`run_bench` launches it locally.
    """
    torch, dist = torch_modules()
    rank, n = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch_dtype = getattr(torch, dtype)
    itemsize = torch.empty(0, dtype=torch_dtype).element_size()
    calls = {"library": _library(dist, collective), "ringlab": _ringlab(collective)}
    times, wrong = [], []
    for size in sizes:
        buffers = _buffers(torch, collective, _count(collective, size, itemsize, n), rank, n, torch_dtype, device)
        wrong.append({who: {where: _count_wrong(torch, collective, *buffers[where], rank, n, call, sync)
                            for where in buffers} for who, call in calls.items()})
        for out, inp in buffers.values():  # zeros: in-place all-reduce repeated many times stays finite
            out.zero_()
            inp.zero_()
        jobs = [(who, where, call, *buffers[where]) for who, call in calls.items() for where in buffers]
        for _ in range(warmup):
            for _, _, call, out, inp in jobs:
                call(out, inp)
        sync()
        dist.barrier()
        total = {(who, where): 0.0 for who, where, *_ in jobs}
        for _ in range(iters):  # alternate call by call so that load drifting over time hits all alike
            for who, where, call, out, inp in jobs:
                start = time.perf_counter()
                call(out, inp)
                sync()
                total[who, where] += time.perf_counter() - start
        times.append({who: {where: total[who, where] / iters for where in buffers} for who in calls})
        del buffers, jobs
    return {"device": device_info(), "times": times, "wrong": wrong}


def combine(collective: str, backend: str, dtype: str, sizes: list[int], per_rank: list[dict]) -> list[BenchRow]:
    """One :class:`BenchRow` per size from every rank's :func:`bench_rank` result: times averaged over
    the ranks (nccl-tests ``-a 1``), ``#wrong`` summed over them."""
    torch, _ = torch_modules()
    world_size = len(per_rank)
    itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    rows = []
    for i, size in enumerate(sizes):
        count = _count(collective, size, itemsize, world_size)
        mean = {(who, where): sum(r["times"][i][who][where] for r in per_rank) / world_size * 1e6
                for who in IMPLEMENTATIONS for where in ("out_of_place", "in_place")}
        bad = {(who, where): sum(r["wrong"][i][who][where] for r in per_rank)
               for who in IMPLEMENTATIONS for where in ("out_of_place", "in_place")}
        rows.append(BenchRow(collective, world_size, backend, dtype, count * itemsize, count,
                             mean["library", "out_of_place"], mean["ringlab", "out_of_place"],
                             mean["library", "in_place"], mean["ringlab", "in_place"],
                             bad["library", "out_of_place"], bad["library", "in_place"],
                             bad["ringlab", "out_of_place"], bad["ringlab", "in_place"]))
    return rows


def _check_args(collective: str, dtype: str, iters: int, warmup: int) -> None:
    check_collective(collective, COLLECTIVES)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if iters < 1 or warmup < 0:
        raise ValueError(f"need iters >= 1 and warmup >= 0, got iters={iters}, warmup={warmup}")


def run_bench(collective: str = "all_reduce", world_size: int = 2, backend: str = "gloo", min_bytes: int = 8,
              max_bytes: int = 256 * MiB, dtype: str = "float32", iters: int = 20, warmup: int = 5,
              timeout: float = 1800.0) -> tuple[list[BenchRow], list[dict]]:
    """Launch ``world_size`` local processes and benchmark one collective over ``message_sizes(min_bytes, max_bytes)``.

    Defaults follow nccl-tests (20 timed and 5 warm-up iterations, 8 B to 256 MiB, float32).
    Returns ``(rows, devices)``: one :class:`BenchRow` per size and each rank's :func:`device_info`.
    Raises ValueError for bad arguments, :class:`~ringlab.dist.RankError` /
    :class:`~ringlab.dist.LaunchTimeout` from the launch.
    """
    _check_args(collective, dtype, iters, warmup)
    sizes = message_sizes(min_bytes, max_bytes)
    per_rank = launch(bench_rank, world_size, backend=backend, timeout=timeout,
                      args=(collective, sizes, dtype, iters, warmup))
    return combine(collective, backend, dtype, sizes, per_rank), [r["device"] for r in per_rank]


def torchrun_environment(environ=None) -> dict | None:
    """torchrun's variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) when
    all are set, else None. Raises ValueError when only some are set or a number does not parse."""
    environ = os.environ if environ is None else environ
    present = [k for k in TORCHRUN_VARIABLES if k in environ]
    if not present:
        return None
    if len(present) < len(TORCHRUN_VARIABLES):
        missing = [k for k in TORCHRUN_VARIABLES if k not in environ]
        raise ValueError(f"{', '.join(present)} set but not {', '.join(missing)}: start with torchrun "
                         "(env:// rendezvous needs all five), or unset them for a local run")
    env = {k: environ[k] for k in TORCHRUN_VARIABLES}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
        if not env[key].isdigit():
            raise ValueError(f"{key}={env[key]!r} is not a non-negative integer")
    return env


def run_bench_torchrun(collective: str = "all_reduce", backend: str | None = None, min_bytes: int = 8,
                       max_bytes: int = 256 * MiB, dtype: str = "float32", iters: int = 20, warmup: int = 5,
                       timeout: float = 1800.0) -> tuple[list[BenchRow], list[dict]] | None:
    """Benchmark in a process started by ``torchrun`` (env:// rendezvous from its variables).

    ``backend`` None picks nccl when this process sees a CUDA GPU (it uses GPU ``LOCAL_RANK``), else gloo.
    Every rank runs :func:`bench_rank`; rank 0 gathers the results and returns ``(rows, devices)`` as
    :func:`run_bench` does, the other ranks return None. Raises ValueError for bad arguments.
    """
    _check_args(collective, dtype, iters, warmup)
    sizes = message_sizes(min_bytes, max_bytes)
    torch, dist = torch_modules()
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=timeout))
    try:
        mine = bench_rank(collective, sizes, dtype, iters, warmup)
        gathered: list = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, mine)
        rank = dist.get_rank()
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    return combine(collective, backend, dtype, sizes, gathered), [r["device"] for r in gathered]


def _hosts(devices: list[dict]) -> dict[int, str]:
    """Host name per rank. Node ranks that share a host name (two torchrun launches on one machine
    standing in for two nodes) get ``host/nodeK`` so that a reader counts the nodes torchrun ran."""
    names = {d["host"] for d in devices}
    nodes = {d["node"] for d in devices}
    if len(names) >= len(nodes):
        return {d["rank"]: d["host"] for d in devices}
    return {d["rank"]: f"{d['host']}/node{d['node']}" for d in devices}


def _time(us: float) -> str:
    return f"{us:10.2f}" if us < 1e4 else f"{us:10.0f}"  # nccl-tests drops decimals from 10 ms


def format_table(rows: list[BenchRow], devices: list[dict], min_bytes: int, max_bytes: int, iters: int,
                 warmup: int) -> str:
    """nccl-tests' text report of ``rows``, once per implementation (torch.distributed, then ringlab).

    Each block: ``# Collective test starting``, the ``# nThread ... minBytes ... maxBytes`` header,
    ``#  Rank R Group 0 Pid P on HOST device D [BUS] NAME`` per rank, an ``# Implementation:`` line,
    the column header (size, count, type, redop, root, then out-of-place and in-place time / algbw /
    busbw / #wrong), one row per size, ``# Out of bounds values`` and ``# Avg bus bandwidth`` (mean of
    every busbw printed, as nccl-tests' src/common.cu computes it). Times in us, bandwidths GB/s (1e9 B/s).
    """
    if not rows:
        return "(no sizes)"
    first = rows[0]
    hosts = _hosts(devices)
    out = [f"# ringlab bench: {first.collective}, world_size={first.world_size}, backend={first.backend}, "
           f"dtype={first.dtype}; nccl-tests columns, one table per implementation"]
    for who, label in IMPLEMENTATIONS.items():
        out += [f"# Collective test starting: {first.collective}",
                f"# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} step: 2(factor) warmup iters: "
                f"{warmup} iters: {iters} agg iters: 1 validation: 1 graph: 0",
                "#", "# Using devices"]
        for d in sorted(devices, key=lambda d: d["rank"]):
            out.append(f"#  Rank {d['rank']:2d} Group  0 Pid {d['pid']:6d} on {hosts[d['rank']]:>10} device "
                       f"{d['device']:2d} [{d['bus']}] {d['name']}")
        out += ["#", f"# Implementation: {label}",
                f"#{'':>58}out-of-place{'':>23}in-place",
                f"#{'size':>11} {'count':>12} {'type':>9} {'redop':>7} {'root':>6} {'time':>10} {'algbw':>7} "
                f"{'busbw':>7} {'#wrong':>6} {'time':>10} {'algbw':>7} {'busbw':>7} {'#wrong':>6}",
                f"#{'(B)':>11} {'(elements)':>12} {'':>9} {'':>7} {'':>6} {'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7} "
                f"{'':>6} {'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7}"]
        busbws = []
        for r in rows:
            halves = []
            for t, bad in ((getattr(r, f"{who}_time_us"), getattr(r, f"{who}_wrong")),
                           (getattr(r, f"{who}_in_place_us"), getattr(r, f"{who}_in_place_wrong"))):
                busbws.append(r.busbw(t))
                halves.append(f"{_time(t)} {r.algbw(t):7.2f} {r.busbw(t):7.2f} {bad:6d}")
            out.append(f" {r.size_bytes:11d} {r.count:12d} {NCCL_TESTS_TYPES[r.dtype]:>9} {'sum':>7} {-1:6d} "
                       + " ".join(halves))
        out += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):.4f}", "#",
                f"# Collective test concluded: {first.collective}"]
    return "\n".join(out)


def write_csv(rows: list[BenchRow], path) -> None:
    """Write ``rows`` to ``path`` as CSV, one line per size, with algbw/busbw columns (GB/s, 1e9 B/s)."""
    dicts = [r.as_dict() for r in rows]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(dicts[0]) if dicts else list(BenchRow.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(dicts)
