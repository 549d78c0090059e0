"""The pure part of the GPU monitor, the subject of its exercise: nvidia-smi's CSV text -> :class:`Row`.

No I/O, no clock, no processes: :func:`parse_smi_csv` and :func:`parse_value` turn text into rows,
:meth:`Row.to_record` / :meth:`Row.from_record` turn rows into CSV cells and back. The columns and
row kinds are documented in :mod:`ringlab.labs.gpumon`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

SMI_FIELDS = (
    "index", "uuid", "name", "utilization.gpu", "memory.used", "memory.total", "power.draw", "temperature.gpu",
)
METRICS = ("utilization_gpu_pct", "memory_used_mib", "memory_total_mib", "power_draw_w", "temperature_gpu_c")
# Units nvidia-smi prints after each metric when ``nounits`` is not honoured.
_METRIC_UNITS = ("%", "MiB", "MiB", "W", "C")
HEADER = ("timestamp", "kind", "source", "index", "uuid", "name", *METRICS, "code", "message")
KINDS = ("sample", "lost", "back", "error")

_NUMBER = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(\S*)")
_INDEX = re.compile(r"[0-9]+")
_PLACEHOLDER = re.compile(r"\[.*\]|n/?a|not supported|unknown(?: error)?|-?", re.IGNORECASE)
_NOT_AVAILABLE = re.compile(r"\[?(?:n/?a|not supported)\]?|-?", re.IGNORECASE)  # "no such counter", not a failure
CELL_MAX = 1000  # characters per cell; nothing the driver legitimately prints is longer
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Row:
    """One CSV row (see the module docstring for the columns); ``None`` is written as an empty cell."""

    kind: str
    index: int | None = None
    uuid: str = ""
    name: str = ""
    utilization_gpu_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_draw_w: float | None = None
    temperature_gpu_c: float | None = None
    code: int | None = None
    message: str = ""
    timestamp: str = ""
    source: str = ""
    # (field, placeholder) for each metric the driver replaced by a failure placeholder; not a column
    notes: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Row kind={self.kind!r}; accepted: {', '.join(KINDS)}")

    def to_record(self) -> list[str]:
        """The row's cells in :data:`HEADER` order, as text."""
        return [_cell(getattr(self, name)) for name in HEADER]

    @classmethod
    def from_record(cls, record: dict[str, str]) -> Row:
        """Inverse of :meth:`to_record` for a ``{column: text}`` mapping; raises ValueError on bad numbers."""
        values = {}
        for f in fields(cls):
            if f.name not in HEADER:
                continue
            text = record[f.name]
            if f.name in ("index", "code"):
                values[f.name] = int(text) if text else None
            elif f.name in METRICS:
                values[f.name] = float(text) if text else None
            else:
                values[f.name] = text
        return cls(**values)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    text = _CONTROL.sub(" ", str(value))
    if len(text) > CELL_MAX:
        mark = f"...[{len(text):,} chars, truncated]"
        text = text[:CELL_MAX - len(mark)] + mark
    return text


def parse_value(text: str, unit: str = "") -> float | None:
    """Read one nvidia-smi metric: ``"3"``, ``"3 %"`` (with ``unit="%"``) -> 3.0; placeholders -> None.

    Anything that is not a non-negative decimal number, optionally followed by ``unit``, is a
    value the driver did not give (``[N/A]``, ``[Not Supported]``, ``N/A``, ``ERR!``...) and
    comes back as ``None``, never 0.
    """
    match = _NUMBER.fullmatch(text.strip())
    if match is None or match.group(2) not in ("", unit):
        return None
    return float(match.group(1))


def _text(value: str) -> str:
    value = value.strip()
    return "" if _PLACEHOLDER.fullmatch(value) else value


def parse_smi_csv(text: str) -> list[Row]:
    """Parse the stdout of ``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits``.

    Returns one ``Row(kind="sample")`` per GPU line, in order, with metrics as floats and
    placeholders as ``None`` (see :func:`parse_value`); every other non-blank line (driver
    messages such as ``No devices were found``) becomes ``Row(kind="error", message=line)``.
    A GPU line has at least ``len(SMI_FIELDS)`` comma-separated fields and a decimal index;
    commas beyond that are taken to belong to the name. Pure: no I/O, no timestamps.
    """
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        parts = [part.strip() for part in line.split(",")]
        if len(parts) < len(SMI_FIELDS) or not _INDEX.fullmatch(parts[0]):
            rows.append(Row("error", message=line))
            continue
        metrics = parts[-len(METRICS):]
        values = {name: parse_value(value, unit) for name, value, unit in zip(METRICS, metrics, _METRIC_UNITS)}
        notes = tuple((smi_field, text) for smi_field, name, text in zip(SMI_FIELDS[3:], METRICS, metrics)
                      if values[name] is None and not _NOT_AVAILABLE.fullmatch(text))
        rows.append(Row(
            "sample",
            index=int(parts[0]),
            uuid=_text(parts[1]),
            name=_text(", ".join(parts[2:-len(METRICS)])),
            notes=notes,
            **values,
        ))
    return rows
