"""Read text as it arrives from launchers and pastes, and strip what they add in front of each line.

Real nccl-tests output rarely reaches us as the program printed it. The prefixes removed here, each
seen in the fixtures under ``tests/fixtures/nccl``:

* Open MPI ``--tag-output``: ``[1,0]<stdout>:`` (job, rank, stream);
* Ray / SkyPilot log tags: ``(head, rank=0, pid=3808) `` and ``(worker1, rank=1, pid=2769, ip=10.0.0.2) ``;
* Slurm ``srun --label``: ``0: `` (rank);
* ``pdsh`` and ``mpirun --tag-output`` variants that put a host name first: ``10.3.35.83: #  Rank ...``,
  stripped only when what follows is nccl-tests or NCCL output (``GENOA-06: Test NCCL failure`` is
  nccl-tests' own message and keeps its host);
* ``kubectl logs --timestamps`` style ``[2026-04-28 14:14:47] ``;
* Markdown block quotes (``> ``) and indentation from documentation pages.

Nothing here interprets a line; :func:`clean` only returns what the program itself printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OMPI = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_RAY = re.compile(r"^\([\w.-]+, rank=\d+, pid=\d+(?:, ip=[\d.]+)?\) ")
_SRUN = re.compile(r"^\d{1,6}: ")
_STAMP = re.compile(r"^\[\d{4}-\d\d-\d\d[ T][\d:.]+\] ?")
_QUOTE = re.compile(r"^> ?")
# a host name (or address) and a colon in front of something nccl-tests or NCCL printed
_HOST = re.compile(r"^[A-Za-z0-9][\w.-]{0,63}: (?=#|\s*\d+\s+\d+\s|[\w.-]+:\d+:\d+ \[\d+\] |NCCL |RCCL )")

_PREFIXES = (_OMPI, _RAY, _STAMP, _QUOTE, _SRUN, _HOST)
_MAX_PREFIXES = 8  # launchers nest (SkyPilot in front of Open MPI); more than this is not a prefix chain


@dataclass(frozen=True)
class Line:
    """One input line: ``text`` as the program printed it, ``raw`` as received, and where it came from."""

    source: str
    number: int  # 1-based
    raw: str
    text: str

    def where(self) -> str:
        """``source:number`` for messages and evidence."""
        return f"{self.source}:{self.number}"


def clean(raw: str) -> str:
    """``raw`` without launcher prefixes, quote marks, indentation and trailing whitespace."""
    text = raw.rstrip("\r\n").rstrip()
    for _ in range(_MAX_PREFIXES):
        stripped = text.lstrip()
        for pattern in _PREFIXES:
            match = pattern.match(stripped)
            if match:
                stripped = stripped[match.end():]
                break
        else:
            return stripped
        text = stripped
    return text.strip()


def split_lines(text: str, source: str = "<input>") -> list[Line]:
    """Every line of ``text`` (``\\n``, ``\\r\\n`` or ``\\r`` separated) as a :class:`Line`."""
    return [Line(source, i, raw, clean(raw)) for i, raw in enumerate(text.splitlines(), start=1)]


def decode(data: bytes) -> str:
    """``data`` as text: UTF-8, undecodable bytes replaced (pastes arrive in any encoding)."""
    return data.decode("utf-8", errors="replace")
