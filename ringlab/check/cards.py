"""Practice cards: one Markdown file per problem of the problem set, numbers filled in by code.

A card file ``cards/PNN.md`` has three sections, ``## Question``, ``## Answer`` and
``## Follow-ups``. Numbers are never typed into a card: the text holds ``str.format``
fields such as ``{ddp_bytes:,}`` and :data:`CARD_VALUES` computes them with ringlab's own
calculators, so a card cannot drift from the code. Literal braces are written ``{{`` and ``}}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

SECTIONS = ("Question", "Answer", "Follow-ups")


def _p1() -> dict:
    from ringlab.collectives import ring_all_reduce_bytes

    n, numel, itemsize = 8, 1_000_003, 4
    per_rank = ring_all_reduce_bytes(n, numel, itemsize)
    return {
        "n": n, "numel": numel, "nbytes": numel * itemsize, "steps": 2 * (n - 1),
        "min_rank": int(per_rank.min()), "max_rank": int(per_rank.max()),
        "total": int(per_rank.sum()), "bound": 2 * (n - 1) / n * numel * itemsize,
    }


# card id -> function returning the values its text uses
CARD_VALUES: dict[str, Callable[[], dict]] = {"P1": _p1}


@dataclass(frozen=True)
class Card:
    """A rendered practice card."""

    id: str
    title: str
    question: str
    answer: str
    followups: str

    def text(self, reveal: bool = True) -> str:
        parts = [f"{self.id}. {self.title}", "", "QUESTION", self.question]
        if reveal:
            parts += ["", "ANSWER", self.answer, "", "FOLLOW-UPS", self.followups]
        return "\n".join(parts)


def card_ids() -> list[str]:
    """Ids of the shipped cards in problem order (``P1`` .. ``P12``)."""
    names = [p.name for p in resources.files("ringlab.check").joinpath("cards").iterdir() if p.name.endswith(".md")]
    return sorted((f"P{int(n[1:3])}" for n in names), key=lambda c: int(c[1:]))


def _file(card_id: str):
    m = re.fullmatch(r"[Pp]?(\d{1,2})", str(card_id).strip())
    ids = card_ids()
    if not m or f"P{int(m.group(1))}" not in ids:
        raise ValueError(f"unknown card {card_id!r}; cards: {', '.join(ids)}")
    return f"P{int(m.group(1))}", resources.files("ringlab.check").joinpath("cards", f"P{int(m.group(1)):02d}.md")


def load_card(card_id: str) -> Card:
    """Read and render card ``card_id`` (``"P2"``, ``"p2"`` or ``"2"``). Raises ValueError for unknown ids."""
    cid, path = _file(card_id)
    text = path.read_text(encoding="utf-8")
    title = text.splitlines()[0].lstrip("# ").strip()
    values = CARD_VALUES.get(cid, dict)()
    body = text.format_map(values)
    sections = {}
    for name in SECTIONS:
        m = re.search(rf"^## {name}\s*\n(.*?)(?=^## |\Z)", body, flags=re.S | re.M)
        if not m:
            raise ValueError(f"card {cid} has no '## {name}' section")
        sections[name] = m.group(1).strip()
    return Card(cid, title, sections["Question"], sections["Answer"], sections["Follow-ups"])
