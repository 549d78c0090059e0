"""NCCL's choice over message sizes on a cluster, beside ringlab's line-rate time: ``ringlab cost --nccl``.

:func:`nccl_sweep` runs :func:`~ringlab.nccl.tuning.clusters.comm_for_cluster`, :func:`~ringlab.nccl.tuning.model.tune`
and :func:`~ringlab.nccl.tuning.choice.choose` at sizes from 1 KiB to the message size (powers of 4, and the
size itself); :func:`format_sweep` prints it. The line-rate time is the one ``ringlab cost`` reports for the
best algorithm at the message size (the busiest link saturated, no latency), scaled linearly to each size.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringlab import textfmt
from ringlab.calc.units import format_size

from .choice import Choice, choose
from .clusters import comm_for_cluster
from .knobs import validate_env
from .model import tune
from .versions import COLLECTIVE_FUNCTION, get_version

SWEEP_START = 1 << 10  # 1 KiB


@dataclass(frozen=True)
class SweepRow:
    """One size: NCCL's :class:`Choice` and ringlab's line-rate time (seconds; None when unknown)."""

    nbytes: int
    choice: Choice
    line_rate_s: float | None

    def as_dict(self) -> dict:
        c = self.choice
        return {"bytes": self.nbytes, "algorithm": c.algorithm, "protocol": c.protocol, "label": c.label,
                "nccl_time_s": c.time_us * 1e-6, "channels": c.channels, "threads": c.threads,
                "line_rate_time_s": self.line_rate_s}


@dataclass(frozen=True)
class Sweep:
    version: str
    env: dict
    collective: str
    rows: list
    notes: tuple
    ring_channels: int
    comm_channels: int
    line_rate_algorithm: str | None = None

    def as_dict(self) -> dict:
        return {"version": self.version, "env": self.env, "collective": self.collective,
                "ring_graph_channels": self.ring_channels, "channels": self.comm_channels,
                "line_rate_algorithm": self.line_rate_algorithm,
                "sizes": [r.as_dict() for r in self.rows], "notes": list(self.notes)}


def sweep_sizes(size: int) -> list[int]:
    """1 KiB, 4 KiB, ... (powers of 4) below ``size``, then ``size`` itself."""
    out, s = [], SWEEP_START
    while s < size:
        out.append(s)
        s *= 4
    return out + [int(size)]


def parse_env(items) -> dict:
    """``["NCCL_PROTO=Simple", ...]`` -> dict; raises ValueError for an item without ``=``."""
    env = {}
    for item in items or ():
        name, eq, value = str(item).partition("=")
        if not eq or not name:
            raise ValueError(f"--nccl-env {item!r}: write NAME=VALUE, e.g. NCCL_PROTO=Simple")
        env[name.strip()] = value.strip()
    return env


def nccl_sweep(cluster, collective: str, size: int, version: str, env: dict,
               line_rate_at_size: float | None = None, compcap: int | None = None,
               line_rate_algorithm: str | None = None) -> Sweep:
    """NCCL ``version``'s choice for ``collective`` at :func:`sweep_sizes` of ``size`` on ``cluster``.

    ``line_rate_at_size`` (seconds at ``size``) is scaled linearly to the other sizes; ``compcap`` as in
    :func:`~ringlab.nccl.tuning.clusters.comm_for_cluster`. Raises ValueError
    for a collective NCCL's model does not cover (all_to_all: send/recv, no tuning), a bad ``env``, or a
    cluster NCCL does not run on."""
    if collective not in COLLECTIVE_FUNCTION:
        raise ValueError(f"--nccl covers {', '.join(COLLECTIVE_FUNCTION)}; {collective} is send/recv in NCCL, "
                         "which its tuning model does not choose")
    v = get_version(version)
    env = validate_env(env, v.algorithms)
    est = comm_for_cluster(cluster, v, env, compcap)
    table = tune(est.comm, v)
    rows = []
    for s in sweep_sizes(size):
        lr = None if line_rate_at_size is None else line_rate_at_size * s / size
        rows.append(SweepRow(s, choose(table, collective, s), lr))
    return Sweep(v.name, env, collective, rows, est.notes, est.comm.ring.n_channels, est.comm.channels,
                 line_rate_algorithm)


def format_sweep(sweep: Sweep) -> str:
    """The sweep as a table with a header naming the NCCL release and environment."""
    env = " ".join(f"{k}={v}" for k, v in sweep.env.items()) or "default environment"
    head = (f"NCCL {sweep.version}'s choice ({env}; {sweep.comm_channels} channels, estimated from the "
            f"cluster: see ringlab.nccl.tuning.clusters):")
    cells = []
    for r in sweep.rows:
        c = r.choice
        lr = "-" if r.line_rate_s is None else f"{r.line_rate_s * 1e6:,.1f}"
        cells.append([f"{r.nbytes:,}", format_size(r.nbytes, binary=True), c.label, str(c.channels),
                      f"{c.time_us:,.1f}", lr])
    lines = [textfmt.wrap(head)] + textfmt.table(
        ["bytes", "", "NCCL algo/proto", "channels", "NCCL time (us)", "line-rate time (us)"], cells,
        align="rrlrrr")
    if sweep.line_rate_algorithm:
        lines.append(textfmt.wrap(f"line-rate time: ringlab's fastest algorithm at the message size "
                                  f"({sweep.line_rate_algorithm}) with its busiest link saturated, scaled with size"))
    lines += [textfmt.wrap(f"note: {n}") for n in sweep.notes]
    return "\n".join(lines)
