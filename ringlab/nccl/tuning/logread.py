"""The tuning table as NCCL prints it (``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING``), both ways.

:func:`format_table` writes a :class:`~ringlab.nccl.tuning.model.Table` line for line as
``ncclTopoTuneModel`` prints it (2.18 and later: blocks of three algorithms, ``%8.1f/%6.1f`` per
protocol); :func:`parse_table` reads those lines back from a log (behind any ``host:pid:tid [dev] NCCL
INFO`` prefix) into ``{(function, algorithm, protocol): (latency_us, bandwidth_GBps)}`` and the
``Max NThreads`` row. :func:`parse_choices` reads the per-call lines, ``AllReduce: 1048576 Bytes -> Algo
RING proto SIMPLE channel{Lo..Hi}={0..7}`` (2.24+) and the older ``1048576 Bytes -> Algo 1 proto 2 time
36.4`` (indices; the time is NCCL's prediction in us).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .model import Table
from .versions import FUNCTIONS, PROTOCOLS

_PREFIX = re.compile(r"^.*?NCCL INFO ?")
_HEAD = re.compile(r"^\s*Algorithm\s*\|(?P<rest>.*)$")
_PROTO = re.compile(r"^\s*Protocol\s*\|")
_THREADS = re.compile(r"^\s*Max NThreads\s*\|(?P<rest>.*)$")
# a row of cells; a row cut short keeps its complete cells
_ROW = re.compile(r"^\s*(?P<fn>" + "|".join(FUNCTIONS) + r")\s*\|(?P<rest>(?:\s*-?[0-9.]+/\s*-?[0-9.]+\s*\|)+)")
_CELL = re.compile(r"(-?[0-9.]+)/\s*(-?[0-9.]+)")
_CHOICE = re.compile(r"(?:(?P<fn>\w+): )?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
                     r"(?: channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})?(?: time (?P<time>[0-9.]+))?")
FIRST_BLOCK = ("Tree", "Ring", "CollNetDirect")  # the table's first three algorithms since 2.18
_ALGO_NAMES = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")  # NCCL_ALGO_* order


def format_table(table: Table) -> list[str]:
    """The lines NCCL prints for ``table`` (without the ``host:pid:tid [dev] NCCL INFO `` prefix)."""
    algos = table.version.algorithms
    per_block = 3
    lines = []
    for start in range(0, len(algos), per_block):
        block = range(start, min(start + per_block, len(algos)))
        lines.append("  Algorithm   |" + "".join(f" {'':>14}   {algos[a]:>14}   {'':>14} |" for a in block))
        lines.append("  Protocol    |" + "".join(f" {p:>14} |" for _ in range(per_block) for p in PROTOCOLS))
        lines.append(" Max NThreads |" + "".join(f" {table.max_threads[a][p]:14} |" for a in block
                                                  for p in range(len(PROTOCOLS))))
        for f, fn in enumerate(FUNCTIONS):
            lines.append(f"{fn:>13} |" + "".join(f"{table.latency[f][a][p]:8.1f}/{table.bandwidth[f][a][p]:6.1f} |"
                                                 for a in block for p in range(len(PROTOCOLS))))
    return lines


@dataclass
class PrintedTable:
    """A tuning table read from a log: ``cells[(function, algorithm, protocol)] = (latency_us, bw_GBps)``
    as printed (one decimal), ``max_threads[(algorithm, protocol)]``, and the lines it came from."""

    cells: dict
    max_threads: dict
    lines: list

    @property
    def algorithms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a for _, a, _ in self.cells))


def message_of(line: str) -> str:
    """A log line without its ``host:pid:tid [dev] NCCL INFO `` prefix (the line itself when it has none)."""
    return _PREFIX.sub("", line, count=1).rstrip("\n") if "NCCL INFO" in line else line.rstrip("\n")


def parse_table(lines) -> PrintedTable | None:
    """The first tuning table in ``lines`` (strings), or None when there is none. Later tables (one per
    communicator) are ignored; a table cut short keeps the rows read (a header and a ``Max NThreads``
    row are enough), and rows pasted without their ``Algorithm`` header belong to the first block
    (Tree, Ring, CollNetDirect)."""
    cells, threads, used = {}, {}, []
    algos: list[str] = []
    seen_blocks = 0
    for raw in lines:
        msg = message_of(raw)
        head = _HEAD.match(msg)
        if head:
            names = [n for n in head["rest"].replace("|", " ").split() if n]
            if seen_blocks and names and names[0] == "Tree":
                break  # the next communicator's table
            algos = names
            seen_blocks += 1
            used.append(raw)
            continue
        if not algos:
            if not (_PROTO.match(msg) or _THREADS.match(msg) or _ROW.match(msg)):
                continue
            algos = list(FIRST_BLOCK)  # a paste that lost the header: the first block is the same in every layout
            seen_blocks = 1
        if _PROTO.match(msg):
            used.append(raw)
            continue
        m = _THREADS.match(msg)
        if m:
            nums = [int(x) for x in re.findall(r"-?\d+", m["rest"])]
            for i, n in enumerate(nums[:3 * len(algos)]):
                threads[(algos[i // 3], PROTOCOLS[i % 3])] = n
            used.append(raw)
            continue
        m = _ROW.match(msg)
        if m:
            vals = _CELL.findall(m["rest"])
            for i, (lat, bw) in enumerate(vals[:3 * len(algos)]):
                cells[(m["fn"], algos[i // 3], PROTOCOLS[i % 3])] = (float(lat), float(bw))
            used.append(raw)
    if not cells and not threads:
        return None
    return PrintedTable(cells, threads, used)


@dataclass(frozen=True)
class PrintedChoice:
    """One ``Bytes -> Algo`` line: the function (None in old logs), bytes, NCCL's algorithm and protocol
    names (``RING``, ``SIMPLE``), the channels it used (``hi - lo + 1``; None in old logs) and its
    predicted time (old logs only)."""

    function: str | None
    nbytes: int
    algorithm: str
    protocol: str
    channels: int | None
    time_us: float | None


def parse_choices(lines) -> list[PrintedChoice]:
    """Every ``Bytes -> Algo`` line of ``lines``, in order (repeats kept: one line per call)."""
    out = []
    for raw in lines:
        m = _CHOICE.search(raw)
        if not m:
            continue
        algo, proto = m["algo"], m["proto"]
        if algo.isdigit():
            algo = _ALGO_NAMES[int(algo)].upper() if int(algo) < len(_ALGO_NAMES) else algo
        if proto.isdigit():
            proto = PROTOCOLS[int(proto)].upper() if int(proto) < len(PROTOCOLS) else proto
        channels = int(m["hi"]) - int(m["lo"]) + 1 if m["lo"] is not None else None
        out.append(PrintedChoice(m["fn"], int(m["bytes"]), algo.upper(), proto.upper(), channels,
                                 float(m["time"]) if m["time"] else None))
    return out


def expected_times(printed: PrintedTable, function: str, nbytes: int) -> dict:
    """``latency + nbytes / (1000 x bandwidth)`` in us from a printed table for each pair with a
    bandwidth (the printout's one decimal limits its precision; Tree's medium-size correction and
    the 1.4x ring plateau are not applied: they need the communicator's shape)."""
    return {(a, p): lat + nbytes / (1000 * bw) for (f, a, p), (lat, bw) in printed.cells.items()
            if f == function and bw > 0}
