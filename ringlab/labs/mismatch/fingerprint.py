"""The pure part of the mismatch lab, the subject of its exercise: per-rank fingerprints compared.

No torch and no processes: :class:`Fingerprint` is what one rank is about to run,
:func:`compare_fingerprints` says which ranks differ in which fields, :func:`describe_mismatch`
says it in words, and :class:`CollectiveMismatchError` carries both.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

FIELDS = ("seq", "op", "shape", "dtype", "device")
OPS = ("ALLREDUCE", "BROADCAST", "BARRIER", "ALLGATHER", "REDUCE")


@dataclass(frozen=True)
class Fingerprint:
    """What one rank is about to run: collective number ``seq``, ``op``, and its tensor's metadata.

    ``shape`` is a tuple of ints, ``dtype`` a torch dtype name without ``torch.`` (``"float32"``),
    ``device`` the device *type* (``"cpu"``, ``"cuda"``); all three are None for ``BARRIER``. Only the
    type: rank r normally drives ``cuda:r``, so ``cuda:0`` on rank 0 and ``cuda:1`` on rank 1 agree, while a
    CPU tensor where the others pass CUDA ones is a mismatch (torch's own check also compares types).
    """

    seq: int
    op: str
    shape: tuple | None = None
    dtype: str | None = None
    device: str | None = None

    @classmethod
    def of(cls, seq: int, op: str, tensor=None) -> Fingerprint:
        """Fingerprint of ``op`` on ``tensor`` (None for barrier). Raises ValueError for an unknown op."""
        if op not in OPS:
            raise ValueError(f"op={op!r}; accepted: {', '.join(OPS)}")
        if tensor is None:
            return cls(seq, op)
        device = getattr(tensor.device, "type", None) or str(tensor.device).split(":")[0]
        return cls(seq, op, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."), device)

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in FIELDS}


def _field(fp, name):
    return fp[name] if isinstance(fp, Mapping) else getattr(fp, name)


def compare_fingerprints(fingerprints: Sequence[Fingerprint | Mapping]) -> dict[int, tuple[str, ...]]:
    """Which ranks differ from the others, and in which fields.

    Args:
        fingerprints: one per rank, in rank order: :class:`Fingerprint` objects or mappings with
            the keys of :data:`FIELDS`.

    Returns:
        ``{rank: (field, ...)}`` for every rank holding, in some field, a value other than that
        field's reference value; fields in :data:`FIELDS` order; ``{}`` when all agree. The
        reference value of a field is the one most ranks hold; on a tie, the tied value that
        appears at the lowest rank (so with two ranks, rank 0 is the reference: which of two
        disagreeing ranks is "wrong" cannot be known, and the error message lists both values).
    """
    differing: dict[int, list[str]] = {}
    for name in FIELDS:
        values = [_field(fp, name) for fp in fingerprints]
        reference = Counter(values).most_common(1)[0][0] if values else None  # ties: first seen
        for rank, value in enumerate(values):
            if value != reference:
                differing.setdefault(rank, []).append(name)
    return {rank: tuple(names) for rank, names in sorted(differing.items())}


def _show(name: str, value) -> str:
    if value is None:
        return "-"
    if name == "shape":
        return "[" + ", ".join(str(d) for d in value) + "]"
    return str(value)


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(str(r) for r in ranks)


def describe_mismatch(fingerprints: Sequence[Fingerprint | Mapping]) -> str:
    """One paragraph naming the differing ranks and, for each differing field, which ranks hold which value."""
    diffs = compare_fingerprints(fingerprints)
    if not diffs:
        return f"all {len(fingerprints)} ranks agree"
    names = [name for name in FIELDS if any(name in fields for fields in diffs.values())]
    lines = ["collective mismatch: " + "; ".join(f"rank {r} differs in {', '.join(f)}" for r, f in diffs.items())]
    for name in names:
        holders: dict[str, list[int]] = {}
        for rank, fp in enumerate(fingerprints):
            holders.setdefault(_show(name, _field(fp, name)), []).append(rank)
        lines.append(f"  {name}: " + " vs ".join(f"{value} on {_ranks(ranks)}" for value, ranks in holders.items()))
    if "op" in names:
        lines.append(_skip_hint(fingerprints, diffs))
    return "\n".join(lines)


def _skip_hint(fingerprints, diffs: dict) -> str:
    """Where ops differ, say which collective each rank is at and suggest the usual cause: a skipped call."""
    at: dict[tuple, list[int]] = {}
    for rank, fp in enumerate(fingerprints):
        at.setdefault((_field(fp, "seq"), _field(fp, "op")), []).append(rank)
    odd = [key for key, ranks in at.items() if all("op" in diffs.get(r, ()) for r in ranks)]
    usual = [key for key in at if key not in odd]
    where = " while ".join(f"{_ranks(at[key])} {'is' if len(at[key]) == 1 else 'are'} at collective #{key[0]} "
                           f"({key[1]})" for key in odd + usual)
    first, expected = odd[0], (usual[0] if usual else odd[-1])
    return (f"  {where}: {_ranks(at[first])} probably skipped a {expected[1]} (or the others run one it does not); "
            f"check the code path that leads {_ranks(at[first])} to collective #{first[0]}")


class CollectiveMismatchError(RuntimeError):
    """Ranks were about to run different collectives. ``fingerprints`` (per rank) and ``differences``
    (``{rank: fields}``, see :func:`compare_fingerprints`) say how; ``str()`` says it in words."""

    def __init__(self, fingerprints: Sequence[Fingerprint]):
        self.fingerprints = list(fingerprints)
        self.differences = compare_fingerprints(self.fingerprints)
        super().__init__(describe_mismatch(self.fingerprints))
