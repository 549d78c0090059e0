"""Practice cards: one topic, one card, two files beside each other (the format: docs/cards.md).

``cards/NN.md`` holds the text of topic NN's card: ``# title``, then ``## Question``, ``## Answer``,
``## Follow-ups`` and optionally ``## Hints`` and ``## Rubric`` (lists of ``- `` items). Numbers are
never typed into a card: the text holds ``str.format`` fields such as ``{ddp_bytes:,}`` and
``cards/NN.py`` computes them with ringlab's calculators in ``values(**params)``, so a card cannot
drift from the code. Literal braces are written ``{{`` and ``}}``.

A parametrised card's module also has ``PARAMS`` (the inputs of the fixed card, those of the
original problem set) and ``draw(rng)``, which returns fresh realistic inputs from a
``numpy.random.Generator``; ``ASKS`` lists the numbers a learner types in (:class:`Ask`), and
``SLIPS`` the mistakes the worked answer names (:class:`Slip`), so that typing one is named. A rubric
item that starts with ``[key]`` is marked from the answer to the ask ``key``; the others are
self-marked. A hint that starts with ``[key]`` is about the ask ``key``: it is offered at that ask
(among the untagged hints, which are about the whole question) and at no other.

Card ids are the two-digit topic numbers (``"05"``; ``"5"`` works too). The ids of the old problem
set (``"P5"``, ``"P05"``) are aliases: :func:`resolve` maps them and says the new id.
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from types import ModuleType

from ringlab.course import resolve_card

SECTIONS = ("Question", "Answer", "Follow-ups")
OPTIONAL_SECTIONS = ("Hints", "Rubric")
UNITS = ("B", "s", "B/s", "FLOP/B", "1")  # what an Ask's value is measured in; "1" is a plain number


@dataclass(frozen=True)
class Ask:
    """One number the learner types in: ``values()[key]``, a quantity of dimension ``unit`` (one of
    :data:`UNITS`) expressed in ``show`` ("B", "ms", "GB/s"; "" for the base unit).

    ``label`` is the prompt; a bare typed number is read in ``show``. ``rel_tol`` is the accepted
    relative error (0 for an exact integer such as a block count; a value equal to the answer at the
    precision typed is accepted too), and
    ``world_size`` names the value holding the count (of ranks; of sequences with ``per="sequence"``)
    when a per-``per`` figure and the total can be confused. ``noun`` is what a count counts
    ("block"): "1,280 blocks" is then read as 1280.
    """

    key: str
    label: str
    unit: str = "B"
    show: str = ""
    rel_tol: float = 0.02
    world_size: str | None = None
    per: str = "rank"
    noun: str = ""

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"Ask {self.key!r}: unit={self.unit!r}; accepted: {', '.join(UNITS)}")
        if not 0 <= self.rel_tol < 0.5:
            raise ValueError(f"Ask {self.key!r}: rel_tol={self.rel_tol!r} must be in [0, 0.5)")
        if self.noun and (self.unit != "1" or not re.fullmatch(r"[a-z]+", self.noun)):
            raise ValueError(f"Ask {self.key!r}: noun={self.noun!r} must be a lower-case word, for unit '1' only")


@dataclass(frozen=True)
class Slip:
    """A mistake the card's worked answer names, as data: typing ``values()[value]`` (in the ``show`` unit of
    the ask ``ask``, computed by the card's ``values()`` with ringlab's calculators, the way the slip
    computes it) for ask ``ask`` is named with ``says``, a sentence ``str.format``-ed with ``values()``.
    A value of None means the slip does not apply to the drawn numbers."""

    ask: str
    value: str
    says: str


@dataclass(frozen=True)
class NamedValue:
    """A slip of one drawn card: ``value`` in the ask's ``show`` unit, and the sentence that names it."""

    ask: str
    value: float
    says: str


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
    hint_asks: tuple[str | None, ...] = ()  # the ask each hint is about (None: the whole question)
    slips: tuple[NamedValue, ...] = ()  # the card's named slips that the drawn numbers tell from the answer

    def hints_for(self, key: str | None) -> tuple[str, ...]:
        """The hints offered at ask ``key``, in the card's order: those about it and those about the whole
        question; all of them for ``key`` None (a card without asks)."""
        tags = self.hint_asks or (None,) * len(self.hints)
        return self.hints if key is None else tuple(h for h, t in zip(self.hints, tags) if t in (None, key))

    def slips_for(self, key: str) -> tuple[NamedValue, ...]:
        return tuple(s for s in self.slips if s.ask == key)

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
    keys = {a.key for a in asks}
    hints = [split_rubric(i) for i in _items(sections["Hints"])]
    unknown_keys = {k for k, _ in hints} - keys - {None}
    if unknown_keys:
        raise ValueError(f"card {cid}: hints tagged {sorted(unknown_keys)}, which no Ask defines")
    unknown_keys = {split_rubric(i)[0] for i in _items(sections["Rubric"])} - keys - {None}
    if unknown_keys:
        raise ValueError(f"card {cid}: rubric items marked by {sorted(unknown_keys)}, which no Ask defines")
    expected = {a.key: values[a.key] for a in asks}
    return Card(cid, title, sections["Question"], sections["Answer"], sections["Follow-ups"],
                hints=tuple(h for _, h in hints), rubric=_items(sections["Rubric"]), asks=asks,
                expected=expected, params=inputs, values=values, hint_asks=tuple(k for k, _ in hints),
                slips=_named_slips(cid, mod, asks, expected, values))


def _named_slips(cid: str, mod: ModuleType, asks: tuple[Ask, ...], expected: dict, values: dict):
    """The module's ``SLIPS`` for these values: checked against the asks and values, formatted, and without
    those the drawn numbers cannot tell from the answer (within the ask's tolerance; None: not applicable)."""
    by_key = {a.key: a for a in asks}
    named = []
    for slip in getattr(mod, "SLIPS", ()):
        if slip.ask not in by_key or slip.value not in values:
            raise ValueError(f"card {cid}: slip {slip.says[:40]!r} names ask {slip.ask!r} and value {slip.value!r}; "
                             f"asks: {sorted(by_key)}; a slip's value must be a key of values()")
        value, want, tol = values[slip.value], expected[slip.ask], by_key[slip.ask].rel_tol
        if value is None or not math.isfinite(value):
            continue
        if abs(value - want) <= max(tol * abs(want), 1e-9 * abs(want)):
            continue
        named.append(NamedValue(slip.ask, float(value), slip.says.format_map(values)))
    return tuple(named)
