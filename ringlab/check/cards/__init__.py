"""Practice cards: one topic, one card, two files beside each other (the format: docs/cards.md).

``cards/NN.md`` holds the text of topic NN's card: ``# title``, then ``## Question``, ``## Answer``,
``## Follow-ups`` and optionally ``## Hints`` and ``## Rubric`` (lists of ``- `` items). Numbers are
never typed into a card: the text holds ``str.format`` fields such as ``{ddp_bytes:,}`` and
``cards/NN.py`` computes them with ringlab's calculators in ``values(**params)``, so a card cannot
drift from the code. Literal braces are written ``{{`` and ``}}``.

A parametrised card's module also has ``PARAMS`` (the inputs of the fixed card, those of
PROBLEMS.md) and ``draw(rng)``, which returns fresh realistic inputs from a
``numpy.random.Generator``; ``ASKS`` lists the numbers a learner types in (:class:`Ask`). A rubric
item that starts with ``[key]`` is marked from the answer to the ask ``key``; the others are
self-marked.

Card ids are the two-digit topic numbers (``"05"``; ``"5"`` works too). The ids of the old problem
set (``"P5"``, ``"P05"``) are aliases: :func:`resolve` maps them and says the new id.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from importlib import resources
from types import ModuleType

SECTIONS = ("Question", "Answer", "Follow-ups")
OPTIONAL_SECTIONS = ("Hints", "Rubric")
UNITS = ("B", "s", "B/s", "FLOP/B", "1")  # what an Ask's value is measured in; "1" is a plain number


@dataclass(frozen=True)
class Ask:
    """One number the learner types in: ``values()[key]``, a quantity of dimension ``unit`` (one of
    :data:`UNITS`) expressed in ``show`` ("B", "ms", "GB/s"; "" for the base unit).

    ``label`` is the prompt; a bare typed number is read in ``show``. ``rel_tol`` is the accepted
    relative error (0 for an exact integer such as a block count), and
    ``world_size`` names the value holding the count (of ranks; of sequences with ``per="sequence"``)
    when a per-``per`` figure and the total can be confused.
    """

    key: str
    label: str
    unit: str = "B"
    show: str = ""
    rel_tol: float = 0.02
    world_size: str | None = None
    per: str = "rank"

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"Ask {self.key!r}: unit={self.unit!r}; accepted: {', '.join(UNITS)}")
        if not 0 <= self.rel_tol < 0.5:
            raise ValueError(f"Ask {self.key!r}: rel_tol={self.rel_tol!r} must be in [0, 0.5)")


@dataclass(frozen=True)
class Card:
    """A rendered practice card. ``expected`` maps each ask's key to its worked value (in the ask's ``show``
    unit); ``values`` is everything the card's ``values()`` returned; ``params`` its inputs."""

    id: str
    title: str
    question: str
    answer: str
    followups: str
    hints: tuple[str, ...] = ()
    rubric: tuple[str, ...] = ()
    asks: tuple[Ask, ...] = ()
    expected: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)

    def text(self, reveal: bool = True) -> str:
        parts = [f"{self.id}. {self.title}", "", "QUESTION", self.question]
        if reveal:
            parts += ["", "ANSWER", self.answer, "", "FOLLOW-UPS", self.followups]
        return "\n".join(parts)


def card_ids() -> list[str]:
    """Ids of the shipped cards in topic order: ``["01", "02", ...]``, one per ``cards/NN.md``."""
    names = (p.name for p in resources.files(__name__).iterdir())
    return sorted(n[:2] for n in names if re.fullmatch(r"\d\d\.md", n))


def resolve(card_id: str) -> tuple[str, str | None]:
    """``card_id`` -> (topic number, a note when it was an old id), e.g. ``"P5"`` -> ``("05", "card P5 is now 05 ...")``.

    Accepts ``"05"``, ``"5"`` and the old ``"P5"``/``"p05"`` (mapped by :func:`ringlab.course.resolve_card`).
    Raises ValueError naming the shipped cards when the id is unknown or its topic has no card yet.
    """
    from ringlab.course import resolve_card

    ids = card_ids()
    try:
        cid, note = resolve_card(card_id)
    except ValueError:
        cid, note = None, None
    if cid not in ids:
        raise ValueError(f"unknown card {card_id!r}; cards: {', '.join(ids)} (old ids P1..P16 still work)")
    return cid, note


def module(card_id: str) -> ModuleType:
    """The Python module beside card ``card_id``'s text (``cards/NN.py``)."""
    return importlib.import_module(f"{__name__}.{resolve(card_id)[0]}")


def is_parametrised(card_id: str) -> bool:
    """Whether the card draws fresh numbers (its module has ``draw``)."""
    return hasattr(module(card_id), "draw")


def draw_params(card_id: str, rng) -> dict:
    """Fresh inputs for a parametrised card from ``rng`` (a ``numpy.random.Generator``); ``{}`` for a fixed card."""
    mod = module(card_id)
    return dict(mod.draw(rng)) if hasattr(mod, "draw") else {}


def _items(section: str) -> tuple[str, ...]:
    return tuple(" ".join(i.split()) for i in re.split(r"^- ", section, flags=re.M) if i.strip())


def split_rubric(item: str) -> tuple[str | None, str]:
    """A rubric item -> (the ask key that marks it, or None if self-marked; its text without the key)."""
    m = re.fullmatch(r"\[(\w+)\]\s*(.*)", item, flags=re.S)
    return (m.group(1), m.group(2)) if m else (None, item)


def load_card(card_id: str, params: dict | None = None) -> Card:
    """Read and render card ``card_id`` (``"05"``, ``"5"`` or an old id ``"P5"``).

    ``params`` overrides the inputs of a parametrised card (keys of its ``PARAMS``; e.g. from
    :func:`draw_params`). Raises ValueError for an unknown id, an unknown parameter or a card
    missing a required section.
    """
    cid = resolve(card_id)[0]
    mod = module(cid)
    defaults = dict(getattr(mod, "PARAMS", {}))
    params = dict(params or {})
    unknown = set(params) - set(defaults)
    if unknown:
        raise ValueError(f"card {cid}: unknown parameter(s) {sorted(unknown)}; accepted: {sorted(defaults) or 'none'}")
    inputs = {**defaults, **params}
    values = mod.values(**inputs)
    text = resources.files(__name__).joinpath(f"{cid}.md").read_text(encoding="utf-8")
    title = text.splitlines()[0].lstrip("# ").strip()
    body = text.format_map(values)
    sections = {}
    for name in SECTIONS + OPTIONAL_SECTIONS:
        m = re.search(rf"^## {name}\s*\n(.*?)(?=^## |\Z)", body, flags=re.S | re.M)
        if not m and name in SECTIONS:
            raise ValueError(f"card {cid} has no '## {name}' section")
        sections[name] = m.group(1).strip() if m else ""
    asks = tuple(getattr(mod, "ASKS", ()))
    unknown_keys = {split_rubric(i)[0] for i in _items(sections["Rubric"])} - {a.key for a in asks} - {None}
    if unknown_keys:
        raise ValueError(f"card {cid}: rubric items marked by {sorted(unknown_keys)}, which no Ask defines")
    return Card(cid, title, sections["Question"], sections["Answer"], sections["Follow-ups"],
                hints=_items(sections["Hints"]), rubric=_items(sections["Rubric"]), asks=asks,
                expected={a.key: values[a.key] for a in asks}, params=inputs, values=values)
