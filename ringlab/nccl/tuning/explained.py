"""What ``ringlab explain`` says about NCCL's own expectations: per size, "NCCL expected X us with
ALGO/PROTO; measured Y us", from the tuning table and the ``Bytes -> Algo`` lines of the log.

The expected time is NCCL's own when its line prints one (``... time 36.4``, older releases), else
``latency + bytes / (1000 x bandwidth)`` read from the printed table for the pair NCCL chose (its
``Bytes -> Algo`` line at that size; without those lines, the pair with the least time in the table),
with Tree's medium-size correction and the multi-node Ring/Simple all-reduce plateau factor of
``ncclTopoGetAlgoTime`` applied when the log gives the rank, node and channel counts. The table prints
one decimal, so the figure is good to about 5 % for bandwidth-bound sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .knobs import knob_names
from .logread import parse_choices, parse_table
from .versions import COLLECTIVE_FUNCTION, FUNCTIONS, PROTOCOLS, V2_30

MAX_SIZES_SHOWN = 10  # sizes in the text report (JSON has all)


@dataclass(frozen=True)
class Expectation:
    """One size: what NCCL chose (``source`` says from where: ``log`` or ``table``) and expected, and what
    nccl-tests measured (out-of-place time, us; None without a row of that size)."""

    nbytes: int
    algorithm: str
    protocol: str
    expected_us: float | None
    measured_us: float | None
    source: str

    def text(self) -> str:
        exp = "?" if self.expected_us is None else f"{self.expected_us:,.1f} us"
        meas = "no row of this size" if self.measured_us is None else f"{self.measured_us:,.1f} us"
        ratio = ""
        if self.expected_us and self.measured_us:
            ratio = f" ({self.measured_us / self.expected_us:,.1f}x NCCL's figure)"
        how = "" if self.source == "log" else " (the table's fastest; no Bytes -> Algo line)"
        return f"{self.nbytes:,} B: NCCL expected {exp} with {self.algorithm}/{self.protocol}{how}; measured {meas}{ratio}"

    def as_dict(self) -> dict:
        return {"bytes": self.nbytes, "algorithm": self.algorithm, "protocol": self.protocol,
                "expected_s": None if self.expected_us is None else self.expected_us * 1e-6,
                "measured_s": None if self.measured_us is None else self.measured_us * 1e-6, "source": self.source}


_NAME = {"TREE": "Tree", "RING": "Ring", "COLLNET_DIRECT": "CollNetDirect", "COLLNET_CHAIN": "CollNetChain",
         "NVLS": "NVLS", "NVLS_TREE": "NVLSTree", "PAT": "PAT", "LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}


def _expected(printed, function: str, algo: str, proto: str, nbytes: int, log) -> float | None:
    cell = printed.cells.get((function, algo, proto))
    if cell is None or cell[1] <= 0:
        return None
    lat, bw = cell
    log_size = (nbytes >> 6).bit_length() - 1
    if algo == "Tree" and function == "AllReduce" and 0 <= log_size < 23:
        bw *= V2_30.tree_correction[PROTOCOLS.index(proto)][log_size]
    ranks, nodes, channels = log.nranks, log.nnodes, log.coll_channels
    if algo == "Ring" and proto == "Simple" and function == "AllReduce" and nodes and nodes > 1 and ranks and channels \
            and nbytes // (channels * ranks) >= 64:
        lat *= 1.4  # Ampere and later; 1.9 before
    return lat + nbytes / (1000 * bw)


def expectations(log, run, collective: str | None) -> list[Expectation]:
    """Per size of the log's ``Bytes -> Algo`` lines (or of the run's rows when the log has a table but no
    such lines): NCCL's choice, its expected time, the measured time. Without a tuning table, the times that
    older ``Bytes -> Algo ... time T`` lines print; empty when the log has neither."""
    printed = parse_table([ln.raw for ln in getattr(log, "tuning_table", [])])
    chosen = parse_choices([ln.raw for *_, ln in log.tuning])
    if printed is None:
        return _from_timed_lines(chosen, run)
    function = COLLECTIVE_FUNCTION.get(collective or "", None)
    if function is None and chosen and chosen[0].function in FUNCTIONS:
        function = chosen[0].function
    if function is None:
        return []
    measured = _measured(run)
    per_rank = function in ("AllGather", "ReduceScatter")  # its line prints count x size: one rank's share
    out, seen = [], set()
    for c in chosen:
        if c.function not in (None, function):
            continue
        nbytes = c.nbytes * (log.nranks or 1) if per_rank and c.function else c.nbytes
        if nbytes in seen:
            continue
        seen.add(nbytes)
        algo, proto = _NAME.get(c.algorithm, c.algorithm), _NAME.get(c.protocol, c.protocol)
        expected = c.time_us if c.time_us is not None else _expected(printed, function, algo, proto, nbytes, log)
        out.append(Expectation(nbytes, algo, proto, expected, measured.get(nbytes), "log"))
    if not chosen:
        for size in sorted(measured):
            best = None
            for (f, a, p), (lat, bw) in printed.cells.items():
                if f != function or bw <= 0:
                    continue
                t = _expected(printed, function, a, p, size, log)
                if t is not None and (best is None or t < best[0]):
                    best = (t, a, p)
            if best:
                out.append(Expectation(size, best[1], best[2], best[0], measured[size], "table"))
    return sorted(out, key=lambda e: e.nbytes)


def _measured(run) -> dict:
    out = {}
    for r in run.rows:
        m = r.out_of_place or r.in_place
        if m is not None:
            out.setdefault(r.size, m.time_us)
    return out


def _from_timed_lines(chosen, run) -> list[Expectation]:
    """Older logs (and patched builds) print NCCL's predicted time on the line itself: ``1048576 Bytes ->
    Algo 1 proto 2 time 36.4``; without a table, those are the expectations."""
    measured, out, seen = _measured(run), [], set()
    for c in chosen:
        if c.time_us is None or c.nbytes in seen:
            continue
        seen.add(c.nbytes)
        out.append(Expectation(c.nbytes, _NAME.get(c.algorithm, c.algorithm), _NAME.get(c.protocol, c.protocol),
                               c.time_us, measured.get(c.nbytes), "log"))
    return sorted(out, key=lambda e: e.nbytes)


def text_lines(exps: list[Expectation]) -> list[str]:
    """The report's lines: the sizes the run measured (all sizes when it has no rows), at most
    :data:`MAX_SIZES_SHOWN` of them spread over the range."""
    if not exps:
        return []
    if any(e.measured_us is not None for e in exps):  # the sizes the run measured
        exps = [e for e in exps if e.measured_us is not None]
    shown = exps
    if len(exps) > MAX_SIZES_SHOWN:
        step = (len(exps) - 1) / (MAX_SIZES_SHOWN - 1)
        shown = [exps[round(i * step)] for i in range(MAX_SIZES_SHOWN)]
    lines = ["  NCCL's own model (TUNING table):"]
    lines += [f"    {e.text()}" for e in shown]
    if len(shown) < len(exps):
        lines.append(f"    ({len(exps) - len(shown)} more size(s) in --json)")
    return lines


def with_knobs(findings: list) -> list:
    """``findings`` with the NCCL variables that cause or cure each one named at the end of its message
    (those it does not name already; :data:`ringlab.nccl.tuning.knobs.FINDING_KNOBS`)."""
    out = []
    for f in findings:
        names = [k for k in knob_names(f.id) if k not in f.message]
        out.append(replace(f, message=f"{f.message} (variables: {', '.join(names)})") if names else f)
    return out
