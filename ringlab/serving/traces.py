"""Production request traces: load Azure's and Mooncake's published traces and replay them as requests.

Two formats, told apart by their first line (or named with ``trace_format``):

- ``azure``: the Azure LLM inference traces (github.com/Azure/AzurePublicDataset,
  AzureLLMInferenceDataset2023.md and 2024.md, CC-BY-4.0): CSV with the header
  ``TIMESTAMP,ContextTokens,GeneratedTokens``; TIMESTAMP is a date-time (``2023-11-16 18:15:46.6805900``,
  or ``2024-05-10 00:00:00.009930+00:00`` in the 2024 week-long files), read to the microsecond.
- ``mooncake``: Mooncake's traces (github.com/kvcache-ai/Mooncake, FAST25-release/README.md, Apache-2.0):
  JSON lines ``{"timestamp": ms, "input_length": int, "output_length": int, "hash_ids": [int, ...]}``, one
  hash id per block of :data:`MOONCAKE_HASH_BLOCK` = 512 tokens (the last block partial), equal ids marking
  equal prefix blocks.

:func:`load_trace` reads a file a line at a time (a multi-GB trace is never held whole; ``limit`` stops
early) into :class:`TraceRequest` records, arrival times in seconds from the first request.
:func:`trace_requests` turns them into the scheduler's :class:`~ringlab.serving.requests.Request`, each prompt
a :class:`~ringlab.serving.requests.HashedPrompt`: Mooncake's hash ids give equal tokens to equal blocks, so
the simulated prefix cache finds the reuse the trace records; an Azure request gets ids of its own and shares
nothing. Excerpts of both ship with ringlab (:data:`BUNDLED`; their sources and licences are in
``ringlab/data/traces/SOURCES.md``).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ringlab.serving.requests import MAX_REQUESTS, HashedPrompt, Request
from ringlab.validation import positive_int

FORMATS = ("azure", "mooncake")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
MOONCAKE_HASH_BLOCK = 512  # tokens per hash id (FAST25-release/README.md)
MAX_LENGTH = 10_000_000  # tokens of one request's input or output: past every model's context (Llama 4 Scout: 10 M)
# Hash ids the replayed prompts hold in all, ~40 B each as Python ints in tuples: 1e7 is about 400 MB (a million
# requests of 5k tokens in 512-token blocks).
MAX_TRACE_HASH_IDS = 10_000_000
DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "traces"
# Short names of the excerpts that ship with ringlab (see DATA_DIR / "SOURCES.md"): name -> (file, what it is)
BUNDLED = {
    "azure-conv": ("azure_conv_2023.csv", "Azure LLM inference 2023, conversation: first 300 requests"),
    "azure-code": ("azure_code_2023.csv", "Azure LLM inference 2023, code: first 300 requests"),
    "mooncake-conv": ("mooncake_conversation.jsonl", "Mooncake FAST'25 conversation trace: first 300 requests"),
}


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace: ``arrival_s`` (float, seconds after the trace's first request), ``input_tokens``
    and ``output_tokens`` (ints >= 1), ``hash_ids`` (tuple of ints, one per 512-token block, or None when the
    trace has none, as Azure's)."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple | None = None


def trace_path(trace: str | Path) -> Path:
    """The file of ``trace``: a name of :data:`BUNDLED` (an excerpt shipped with ringlab), else a path.
    A file that happens to have a bundled name is reached as ``./name``."""
    if isinstance(trace, str) and trace in BUNDLED:
        return DATA_DIR / BUNDLED[trace][0]
    return Path(trace)


def detect_format(path: str | Path) -> str:
    """``"azure"`` or ``"mooncake"`` from the first non-blank line of ``path``: a CSV header naming one of
    :data:`AZURE_COLUMNS` or more, or a JSON object. Raises ValueError (naming the file) for anything else or an
    empty file, OSError if it cannot be read."""
    with open(path, encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                break
        else:
            raise ValueError(f"{path}: the file is empty: a trace needs at least one request")
    if line.lstrip().startswith("{"):
        return "mooncake"
    if set(AZURE_COLUMNS) & {c.strip() for c in line.split(",")}:  # a missing column is named when read
        return "azure"
    raise ValueError(f"{path}:{number}: cannot tell the format: the first line is neither a CSV header with "
                     f"{','.join(AZURE_COLUMNS)} (azure) nor a JSON object (mooncake); got {line.strip()[:60]!r}")


def iter_trace(path: str | Path, trace_format: str | None = None) -> Iterator[TraceRequest]:
    """The requests of the trace file ``path``, one :class:`TraceRequest` at a time, read as they are asked for
    (see :func:`load_trace`). The format is checked (or detected) now, the rows as they are read."""
    if trace_format is None:
        trace_format = detect_format(path)
    elif trace_format not in FORMATS:
        raise ValueError(f"trace_format must be one of {', '.join(FORMATS)} (or None: detect), got {trace_format!r}")
    return _records(path, _azure_rows(path) if trace_format == "azure" else _mooncake_rows(path))


def _records(path, rows: Iterator[tuple]) -> Iterator[TraceRequest]:
    """Records of parsed ``rows`` (line, seconds, field, input, output, hash ids): arrival from the first row,
    and the one rule for order."""
    first = previous = None
    count = 0
    for line, time_s, field, inp, out, hashes in rows:
        if first is None:
            first = previous = time_s
        if time_s < previous:
            raise ValueError(f"{path}:{line}: {field} goes back in time ({time_s - previous:+.6f} s after the "
                             f"row before): a trace must be sorted by arrival")
        previous = time_s
        count += 1
        yield TraceRequest(time_s - first, inp, out, hashes)
    if not count:
        raise ValueError(f"{path}: no requests: the file holds none (it is empty, or a header alone)")


def load_trace(path: str | Path, trace_format: str | None = None, limit: int | None = None) -> list[TraceRequest]:
    """The requests of the trace file ``path`` (list of :class:`TraceRequest`, in file order).

    ``trace_format``: ``"azure"``, ``"mooncake"`` or None (detected from the first line, :func:`detect_format`).
    ``limit``: read at most this many requests (int >= 1; None: all). The file is read a line at a time, so
    only the records are held, never the file. Arrival times are seconds after the first request (Azure's
    TIMESTAMP to the microsecond, Mooncake's milliseconds / 1000).
    Raises ValueError naming the file, the line and the field for a malformed file: an empty file or one
    without a request, a missing CSV column or JSON field, a length that is not an integer in 1 ..
    :data:`MAX_LENGTH`, a date-time that does not parse, hash ids that are not ``ceil(input_length / 512)``
    integers >= 0, a timestamp earlier than the one before (a trace is sorted by arrival); OSError if the file
    cannot be read.
    """
    if limit is not None:
        limit = positive_int(limit, "limit")
    return list(itertools.islice(iter_trace(path, trace_format), limit))


def trace_requests(records: Iterable[TraceRequest], hash_block: int = MOONCAKE_HASH_BLOCK,
                   n: int = 1) -> list[Request]:
    """The scheduler's requests for trace ``records``: request ``i`` arrives at ``records[i].arrival_s`` with a
    :class:`~ringlab.serving.requests.HashedPrompt` of ``input_tokens`` tokens in blocks of ``hash_block``
    (Mooncake's 512) and ``max_new_tokens = output_tokens``, ``n`` samples each.

    A record's ``hash_ids`` become its prompt's, so equal ids give equal tokens and prefix caching finds the
    blocks the trace shares; a record without them (Azure) gets fresh ids above every id of the trace, so it
    shares no block. Raises ValueError for hash ids that do not fit ``hash_block`` (naming the record), for no
    records, and, before building anything, for more than :data:`~ringlab.serving.requests.MAX_REQUESTS` records
    or prompts of more than :data:`MAX_TRACE_HASH_IDS` hash ids in all.

    Memory: the prompts are a few ints per ``hash_block`` tokens, and a scheduler holds token lists only for
    the requests it has admitted and not finished (waiting ones keep their HashedPrompt), so a replay's size
    follows the trace's requests and the engine's batch, not the trace's tokens.
    """
    records = list(records)
    hash_block, n = positive_int(hash_block, "hash_block"), positive_int(n, "n")
    if not records:
        raise ValueError("records: no requests to replay")
    if len(records) > MAX_REQUESTS:
        raise ValueError(f"{len(records):,} requests is above {MAX_REQUESTS:,}: replay fewer (limit / --trace-limit)")
    ids = sum(-(-r.input_tokens // hash_block) for r in records)
    if ids > MAX_TRACE_HASH_IDS:
        raise ValueError(f"{len(records):,} requests' prompts are {ids:,} blocks of {hash_block} tokens, at most "
                         f"{MAX_TRACE_HASH_IDS:,}: replay fewer (limit / --trace-limit)")
    fresh = 1 + max((max(r.hash_ids) for r in records if r.hash_ids), default=-1)
    out = []
    for i, r in enumerate(records):
        ids = r.hash_ids
        if ids is None:
            count = -(-r.input_tokens // hash_block)
            ids, fresh = range(fresh, fresh + count), fresh + count
        try:
            prompt = HashedPrompt(r.input_tokens, ids, hash_block)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"record {i}: {exc}") from None
        out.append(Request(i, r.arrival_s, prompt, r.output_tokens, n))
    return out


def _length(path, line: int, field: str, value) -> int:
    """A token count of the trace: an int in 1 .. MAX_LENGTH (JSON int or CSV digits), else ValueError naming
    the spot."""
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ValueError(f"{path}:{line}: {field} must be an integer >= 1, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{path}:{line}: {field} must be an integer >= 1, got {value!r}")
    if value > MAX_LENGTH:
        raise ValueError(f"{path}:{line}: {field} {value:,} tokens is above {MAX_LENGTH:,}: no model serves such a "
                         "request")
    return value


def _azure_rows(path) -> Iterator[tuple]:
    """(line, seconds since the epoch of the first row's clock, field, input, output, None) per CSV row."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        while header is not None and not any(c.strip() for c in header):
            header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: the file is empty: a trace needs at least one request")
        names = [c.strip() for c in header]
        missing = [c for c in AZURE_COLUMNS if c not in names]
        if missing:
            raise ValueError(f"{path}:{reader.line_num}: the header lacks column {', '.join(missing)} "
                             f"(an Azure trace has {','.join(AZURE_COLUMNS)}); got {','.join(names)[:80]!r}")
        t_col, in_col, out_col = (names.index(c) for c in AZURE_COLUMNS)
        width = len(names)
        epoch = None
        for row in reader:
            line = reader.line_num
            if not row or len(row) == 1 and not row[0].strip():  # a blank line
                continue
            if len(row) != width:
                raise ValueError(f"{path}:{line}: expected {width} fields ({','.join(names)}), got {len(row)}")
            stamp = row[t_col].strip()
            try:
                when = datetime.fromisoformat(stamp)
                if epoch is None:
                    epoch = when
                seconds = (when - epoch).total_seconds()
            except ValueError:
                raise ValueError(f"{path}:{line}: TIMESTAMP {stamp!r} is not a date-time "
                                 "(YYYY-MM-DD HH:MM:SS[.fraction][+HH:MM])") from None
            except TypeError:  # one stamp with a time zone, another without
                raise ValueError(f"{path}:{line}: TIMESTAMP {stamp!r} and the first row's "
                                 f"{epoch.isoformat(' ')!r} differ in having a time zone") from None
            yield (line, seconds, "TIMESTAMP", _length(path, line, "ContextTokens", row[in_col]),
                   _length(path, line, "GeneratedTokens", row[out_col]), None)


def _mooncake_rows(path) -> Iterator[tuple]:
    """(line, seconds, field, input, output, hash ids) per JSON line."""
    with open(path, encoding="utf-8-sig") as f:
        for line, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{line}: not a JSON object ({exc.msg} at column {exc.colno})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{line}: expected a JSON object, got {type(row).__name__}")
            try:
                stamp, inp, out, hashes = row["timestamp"], row["input_length"], row["output_length"], row["hash_ids"]
            except KeyError:
                missing = ", ".join(k for k in MOONCAKE_FIELDS if k not in row)
                raise ValueError(f"{path}:{line}: missing field {missing} (a Mooncake trace line has "
                                 f"{', '.join(MOONCAKE_FIELDS)})") from None
            if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
                raise ValueError(f"{path}:{line}: timestamp must be a number of milliseconds, got {stamp!r}")
            inp = _length(path, line, "input_length", inp)
            out = _length(path, line, "output_length", out)
            need = -(-inp // MOONCAKE_HASH_BLOCK)
            if not isinstance(hashes, list) or hashes and (set(map(type, hashes)) != {int} or min(hashes) < 0):
                raise ValueError(f"{path}:{line}: hash_ids must be a list of integers >= 0, got {str(hashes)[:60]}")
            if len(hashes) != need:
                raise ValueError(f"{path}:{line}: hash_ids has {len(hashes)} ids; input_length {inp:,} in blocks "
                                 f"of {MOONCAKE_HASH_BLOCK} needs {need:,}")
            yield line, stamp / 1000, "timestamp", inp, out, tuple(hashes)
