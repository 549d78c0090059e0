"""Recognise the lines of an nccl-tests (or rccl-tests) text report, across versions.

The layouts, from nccl-tests' ``src/common.cu`` / ``src/util.cu`` history and the fixtures:

* header: ``# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5
  iters: 20 agg iters: 1 validation: 1 graph: 0`` (2.18 adds ``unalign: 0``; the oldest print
  no ``#``);
* before it, 2.17+: ``# nccl-tests version 2.18.2 nccl-headers=23007 nccl-library=23007`` and
  ``# Collective test starting: all_reduce_perf``; rccl-tests: ``rccl-tests: Version develop:3f7f785``;
* devices: ``#  Rank  0 Group  0 Pid 895544 on h100-2 device  0 [0002:00:01] NVIDIA H100 80GB HBM3``
  (older: no ``Group``);
* columns: ``size count type redop root`` then, out-of-place and in-place, ``time algbw busbw #wrong``.
  Older versions have no ``root`` and an ``error`` column (the largest deviation, not a count);
  broadcast in some old versions has ``root`` but no ``redop``; per-iteration timing (``-I 1``) adds
  ``i_min i_max i_p99 i_cv%`` to each half, ``-R`` a trailing timestamp; a trace replay prints the
  in-place half only. ``#wrong`` is ``N/A`` where results were not checked and is printed with
  ``%g`` (``1.04858e+06`` for large counts); times of 10 ms and more print without decimals;
* ``ringlab bench`` prints the same layout, one block per implementation, naming it after the
  devices: ``# Implementation: torch.distributed``, below a ``# ringlab bench: ...`` banner;
* footer: ``# Out of bounds values : 0 OK``, ``# Avg bus bandwidth    : 14.9966``,
  2.17+: ``# Collective test concluded: all_reduce_perf``.
"""

from __future__ import annotations

import functools
import math
import re

from .records import Measure

HEADER = re.compile(r"^#?\s*nThread\s+(?P<nthread>\d+)\s+nGpus\s+(?P<ngpus>\d+)\s+minBytes\s+(?P<min>\d+)\s+"
                    r"maxBytes\s+(?P<max>\d+)(?P<rest>.*)$")
_HEADER_FIELDS = re.compile(r"(warmup iters|iters|agg iters|validation|graph|unalign|step):\s*(\S+)")
TESTS_VERSION = re.compile(r"^#?\s*nccl-tests version (?P<version>\S+)(?: nccl-headers=(?P<headers>\d+))?"
                           r"(?: nccl-library=(?P<library>\d+))?")
RCCL_TESTS_VERSION = re.compile(r"^#?\s*rccl-tests: Version (?P<version>\S+)")
LIB_VERSION = re.compile(r"\b(?P<lib>NCCL|RCCL) version (?P<version>\d+\.\d+\.\d+\S*)")
STARTING = re.compile(r"^#?\s*Collective test (?P<what>starting|concluded): (?P<name>\w+)")
DEVICE = re.compile(r"^#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+"
                    r"device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s+(?P<name>.+?)\s*$")
IMPLEMENTATION = re.compile(r"^#\s*Implementation:\s*(?P<name>\S.*?)\s*$")  # ringlab bench's tables
OUT_OF_BOUNDS = re.compile(r"^#?\s*Out of bounds values\s*:\s*(?P<n>\d+)\s*(?P<verdict>OK|FAILED)?")
AVG_BUSBW = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(?P<value>[-+0-9.eE]+|nan|inf)")
FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure|Test timeout")
# lines nccl-tests prints that carry nothing we use
_NOISE = re.compile(r"^#?\s*(?:$|Using devices|\(B\)\s+\(elements\)|out-of-place|Errors with asterisks|"
                    r"Reducing maxBytes|Blocking Enabled|Writing JSON output|skipping json output|GPU memory usage|"
                    r"Testing \d+ cycle|Per-Iteration Report|Parallel Init Enabled|Check results|ringlab bench:)")
# any nccl-tests binary named on a command line
PERF_BINARY = re.compile(r"(?:^|[/\s=])(?P<name>all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|alltoallv|"
                         r"sendrecv|gather|scatter|hypercube)_perf(?:_mpi)?\b")

# an NCCL variable set on a command line (mpirun -x NCCL_X=1, export NCCL_X=1, NCCL_X=1 ./binary)
ENV_ASSIGNMENT = re.compile(r"\bNCCL_[A-Z0-9_]+=\S")

REDOPS = frozenset({"sum", "prod", "max", "min", "avg", "mulsum", "none", "all"})
_DTYPE = re.compile(r"^(?:u?int\d*|float\d*|half|bfloat16|double|char|fp8\w*|f8\w*|bf16|fp16|fp32|f16|f32|f64)$")
_INT = re.compile(r"^-?[0-9]+$")
_UINT = re.compile(r"^[0-9]+$")

# the fields of one half (out-of-place or in-place), by header name
_GROUP_FIELDS = {"time": "time", "cputime": "time", "algbw": "algbw", "busbw": "busbw", "#wrong": "wrong",
                 "wrong": "wrong", "error": "error", "i_min": "iter_min_us", "i_max": "iter_max_us",
                 "i_p99": "iter_p99_us", "i_cv%": "iter_cv_pct"}


class RowError(ValueError):
    """A line that starts like a result row but does not fit the columns."""


def header_fields(match: re.Match) -> dict:
    """The ``nThread`` line as a dict of ints/strings (``nthread``, ``ngpus``, ``min_bytes``, ``max_bytes``, ...)."""
    fields = {"nthread": int(match["nthread"]), "ngpus": int(match["ngpus"]),
              "min_bytes": int(match["min"]), "max_bytes": int(match["max"])}
    for key, value in _HEADER_FIELDS.findall(match["rest"]):
        fields[key.replace(" ", "_")] = value
    return fields


def is_noise(text: str) -> bool:
    """True for nccl-tests lines with no content for us (blank, ``#``, the units line, notices)."""
    return bool(_NOISE.match(text))


def columns_of(text: str) -> tuple[str, ...] | None:
    """The column names of a ``size count type ...`` header line, or None when ``text`` is not one."""
    tokens = text.lstrip("#").split()
    if len(tokens) < 6 or tokens[:2] != ["size", "count"] or tokens[2] != "type" or "busbw" not in tokens:
        return None
    return tuple(tokens)


@functools.lru_cache(maxsize=64)  # a table has one header and many rows
def _schema(columns: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...], bool]:
    """(prefix fields, per-half field lists, trailing timestamp?) of a column header."""
    prefix = tuple(c for c in columns[:5] if c in ("size", "count", "type", "redop", "root"))
    groups: list[list[str]] = []
    stamp = False
    for name in columns[len(prefix):]:
        if name == "timestamp":
            stamp = True
            continue
        field = _GROUP_FIELDS.get(name)
        if field is None:
            raise RowError(f"unknown column {name!r}")
        if field == "time" or not groups:
            groups.append([])
        groups[-1].append(field)
    return prefix, tuple(map(tuple, groups)), stamp


def is_dtype(token: str) -> bool:
    """True for a data type name nccl-tests or rccl-tests prints in the ``type`` column (float, bfloat16, int8...)."""
    return bool(_DTYPE.match(token))


def looks_like_row(tokens: list[str]) -> bool:
    """True when ``tokens`` start like a result row: size and count integers, then a data type."""
    return len(tokens) >= 3 and bool(_UINT.match(tokens[0])) and bool(_UINT.match(tokens[1])) and is_dtype(tokens[2])


def _number(token: str, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise RowError(f"{what} is {token!r}, not a number") from None
    if not 0 <= value < math.inf:  # NaN, a negative or an overflowing value (1e400 reads as inf)
        raise RowError(f"{what} is {token!r}: not a finite number >= 0")
    return value


def _half(tokens: list[str], fields: tuple[str, ...]) -> Measure:
    values: dict = {}
    for token, field in zip(tokens, fields):
        if field in ("time", "algbw", "busbw"):
            values[field] = _number(token, field)
        elif field == "wrong":
            values["wrong"] = None if token == "N/A" else int(round(_number(token, "#wrong")))
        elif field == "error":
            starred = token.endswith("*")
            token = token.rstrip("*")
            values["max_error"] = None if token == "N/A" else _number(token, "error")
            values["over_threshold"] = starred
        elif field.startswith("iter_"):  # -I: the per-iteration summary of this half
            values[field] = _number(token, field)
    if not {"time", "algbw", "busbw"} <= values.keys():
        raise RowError("a result half needs time, algbw and busbw")
    return Measure(time_us=values.pop("time"), **values)


def _guess_columns(tokens: list[str]) -> tuple[str, ...]:
    """Columns for a row seen without its header: modern, old (no root, ``error``) or old broadcast."""
    has_redop = tokens[3] in REDOPS
    wrong = "#wrong"
    if has_redop and len(tokens) > 4 and _INT.match(tokens[4]) and len(tokens) - 5 in (4, 8):
        prefix = ("size", "count", "type", "redop", "root")
    elif has_redop:
        prefix, wrong = ("size", "count", "type", "redop"), "error"
    elif _INT.match(tokens[3]):
        prefix, wrong = ("size", "count", "type", "root"), "error"
    else:
        raise RowError(f"cannot tell the columns from {tokens[3]!r}")
    half = ("time", "algbw", "busbw", wrong)
    return prefix + half + half


def parse_row(tokens: list[str], columns: tuple[str, ...] | None) -> tuple[dict, bool]:
    """Fields of a result row: ``({size, count, dtype, redop, root, out_of_place, in_place}, complete)``.

    ``complete`` is False for a row cut short (a truncated paste): only size, count and type are kept.
    Raises :class:`RowError` for a row whose values do not fit.
    """
    if not looks_like_row(tokens):
        raise RowError("a result row starts with size, count and type")
    if columns is None and len(tokens) < 5:
        return {"size": int(tokens[0]), "count": int(tokens[1]), "dtype": tokens[2]}, False
    columns = columns or _guess_columns(tokens)
    prefix, groups, stamp = _schema(columns)
    if len(tokens) < len(prefix):
        return {}, False
    fields = dict(zip(prefix, tokens))
    row = {"size": int(fields["size"]), "count": int(fields["count"]), "dtype": fields["type"],
           "redop": fields.get("redop"), "root": None}
    if "root" in fields:
        if not _INT.match(fields["root"]):
            raise RowError(f"root is {fields['root']!r}")
        row["root"] = int(fields["root"])
    if row["redop"] is not None and row["redop"] not in REDOPS:
        raise RowError(f"redop is {row['redop']!r}")
    rest = tokens[len(prefix):]
    widths = [len(g) for g in groups]
    need = sum(widths)
    if stamp and len(rest) >= need + 2:
        rest = rest[:need]
    halves: list[Measure | None] = []
    if len(rest) == need:
        start = 0
        for g in groups:
            halves.append(_half(rest[start:start + len(g)], g))
            start += len(g)
    elif len(groups) == 2 and len(rest) == widths[1]:  # in-place only (trace replay, -O 0)
        halves = [None, _half(rest, groups[1])]
    elif len(rest) < need:
        return row, False
    else:
        raise RowError(f"{len(rest)} values after the {len(prefix)} leading columns, expected {need}")
    if len(halves) == 1:
        halves.append(None)
    row["out_of_place"], row["in_place"] = halves[0], halves[1]
    return row, True


# nccl-tests 2.x (2018-): size count type redop root, then time algbw busbw #wrong out of place and in place.
MODERN_COLUMNS = ("size", "count", "type", "redop", "root") + ("time", "algbw", "busbw", "#wrong") * 2
