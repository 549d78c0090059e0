"""The fault script of the shard server: which request of which shard fails, and how.

A SPEC is rules separated by ``;`` (spaces ignored). A per-shard rule is ``SELECTOR=FAULT``:

SELECTOR   ``N`` (shard number, 1-based as in ``model-0000N-of-...``), a shard file name, or ``*`` (every
           shard), then optionally which of that shard's requests it hits: ``#A`` (the A-th, 1-based),
           ``#A-B``, ``#A-`` (A-th and later), or ``?P`` (each request with probability P, drawn from the
           server's seed). Without it: every request.
FAULT      ``latency:DURATION``  wait before the headers (``latency:200ms``)
           ``throttle:RATE``     pace the body at RATE bytes/s (``throttle:4MiB/s``)
           ``stall:F[:DURATION]`` send fraction F of the body, then fall silent for DURATION (default: until
                                 the client hangs up or the server stops), then finish
           ``reset:F``           send fraction F of the body, then close with a TCP RST
           ``truncate:F``        announce the full Content-Length, send fraction F, close cleanly
           ``corrupt:F``         send the whole body with the byte at fraction F changed
           ``status:CODE[:SECONDS]``  answer CODE (400-599) instead, with ``Retry-After: SECONDS`` if given
F is a fraction from 0 to 1 of the bytes the response would carry (after a Range). The first rule that
matches a request is applied; the others are not.

A server-wide rule is ``conn=RATE`` (every body capped at RATE bytes/s), ``link=RATE`` (all bodies together
capped at RATE, like one shared link) or ``busy=K:RATE`` (while more than K connections are open, every body
is capped at RATE: a server that throttles clients opening too many connections).

Example: ``"2=status:404; *#1=status:503:1; 3#1-2=reset:0.5; conn=8MiB/s"``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from ringlab.calc import parsing

KINDS = ("latency", "throttle", "stall", "reset", "truncate", "corrupt", "status")
SERVER_WIDE = ("conn", "link", "busy")
MAX_SECONDS = 3600.0  # a fault longer than an hour is a typo, not a test
_SELECTOR = re.compile(r"^(?P<shard>\*|\d+|[^#?*]+?)(?:#(?P<a>\d+)(?P<dash>-(?P<b>\d+)?)?|\?(?P<p>[0-9.eE+-]+))?$")


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` in :data:`KINDS`; ``fraction`` (0..1) for stall/reset/truncate/corrupt; ``seconds``
    for latency, a stall's length (None: until the client hangs up) or Retry-After (None: no header);
    ``rate`` (bytes/s) for throttle; ``status`` (HTTP code) for status; ``spec``, the rule as written."""

    kind: str
    fraction: float | None = None
    seconds: float | None = None
    rate: float | None = None
    status: int | None = None
    spec: str = ""


@dataclass(frozen=True)
class Rule:
    """A per-shard rule: ``shard`` is a 1-based number, a file name or ``"*"``; requests ``first``..``last``
    (1-based, ``last`` None: no end) or each with ``probability``."""

    shard: int | str
    fault: Fault
    first: int = 1
    last: int | None = None
    probability: float | None = None

    def selects(self, name: str, number: int | None, attempt: int, rng: random.Random) -> bool:
        if self.shard != "*" and self.shard != name and self.shard != number:
            return False
        if self.probability is not None:
            return rng.random() < self.probability
        return attempt >= self.first and (self.last is None or attempt <= self.last)


@dataclass(frozen=True)
class FaultPlan:
    """A parsed SPEC: per-shard ``rules`` in order, and the server-wide caps (bytes/s, None when absent):
    ``conn_rate``, ``link_rate``, ``busy`` = (K, rate)."""

    rules: tuple[Rule, ...] = ()
    conn_rate: float | None = None
    link_rate: float | None = None
    busy: tuple[int, float] | None = None
    spec: str = ""
    _rng: random.Random = field(default_factory=lambda: random.Random(0), compare=False, repr=False)

    def seeded(self, seed: int) -> "FaultPlan":
        """This plan with its probability draws (``?P``) from ``random.Random(seed)``."""
        return FaultPlan(self.rules, self.conn_rate, self.link_rate, self.busy, self.spec, random.Random(seed))

    def fault_for(self, name: str, number: int | None, attempt: int) -> Fault | None:
        """The fault for the ``attempt``-th request (1-based) of shard file ``name`` (shard ``number``), or None."""
        for rule in self.rules:
            if rule.selects(name, number, attempt, self._rng):
                return rule.fault
        return None

    def describe(self) -> str:
        """One line per rule, in words (``"no faults"`` for an empty plan)."""
        lines = [f"{r.fault.spec}" for r in self.rules]
        for label, value in (("conn", self.conn_rate), ("link", self.link_rate)):
            if value is not None:
                lines.append(f"{label}={value:,.0f} B/s")
        if self.busy is not None:
            lines.append(f"busy: past {self.busy[0]} connections every body at {self.busy[1]:,.0f} B/s")
        return "; ".join(lines) if lines else "no faults"


def _fraction(text: str, rule: str) -> float:
    return parsing.parse_real(text, f"fault {rule!r}: fraction", min=0.0, max=1.0)


def _seconds(text: str, rule: str, what: str) -> float:
    return parsing.parse_duration(text, f"fault {rule!r}: {what}", min=0.0, max=MAX_SECONDS, min_open=False)


def _rate(text: str, rule: str) -> float:
    return parsing.parse_bandwidth(text, f"fault {rule!r}: rate", min=1.0, max=1e12)


def parse_fault(text: str, rule: str) -> Fault:
    """One FAULT (``reset:0.5``) of the rule ``rule`` (for messages). ValueError naming the rule otherwise."""
    kind, _, rest = text.partition(":")
    args = rest.split(":") if rest else []
    want = {"latency": (1, 1), "throttle": (1, 1), "stall": (1, 2), "reset": (1, 1), "truncate": (1, 1),
            "corrupt": (1, 1), "status": (1, 2)}
    if kind not in want:
        raise ValueError(f"fault {rule!r}: unknown fault {kind!r}; use one of {', '.join(KINDS)}")
    low, high = want[kind]
    if not low <= len(args) <= high:
        forms = {"latency": "latency:DURATION", "throttle": "throttle:RATE", "stall": "stall:F[:DURATION]",
                 "status": "status:CODE[:SECONDS]"}
        raise ValueError(f"fault {rule!r}: write {forms.get(kind, kind + ':F')} (F a fraction 0..1)")
    if kind == "latency":
        return Fault(kind, seconds=_seconds(args[0], rule, "latency"), spec=rule)
    if kind == "throttle":
        return Fault(kind, rate=_rate(args[0], rule), spec=rule)
    if kind == "status":
        code = parsing.parse_int(args[0], f"fault {rule!r}: status", min=400, max=599)
        after = _seconds(args[1], rule, "Retry-After") if len(args) > 1 else None
        return Fault(kind, status=code, seconds=after, spec=rule)
    seconds = _seconds(args[1], rule, "stall") if len(args) > 1 else None
    return Fault(kind, fraction=_fraction(args[0], rule), seconds=seconds, spec=rule)


def _selector(text: str, rule: str, shards: list[str] | None) -> dict:
    match = _SELECTOR.match(text)
    if not match:
        raise ValueError(f"fault {rule!r}: selector {text!r} is not N, a file name or *, with #A, #A-B, #A- or ?P")
    shard: int | str = match["shard"]
    if shard.isdigit():
        shard = int(shard)
        if shard < 1 or (shards is not None and shard > len(shards)):
            raise ValueError(f"fault {rule!r}: no shard {shard}; shards are numbered 1 to {len(shards or [])}")
    elif shard != "*" and shards is not None and shard not in shards:
        raise ValueError(f"fault {rule!r}: no shard named {shard!r} in the index")
    out: dict = {"shard": shard}
    if match["p"] is not None:
        out["probability"] = parsing.parse_real(match["p"], f"fault {rule!r}: probability", min=0.0, max=1.0)
    elif match["a"] is not None:
        first = int(match["a"])
        last = first if not match["dash"] else (int(match["b"]) if match["b"] else None)
        if first < 1 or (last is not None and last < first):
            raise ValueError(f"fault {rule!r}: request numbers start at 1 and run forward (#1, #2-3, #2-)")
        out.update(first=first, last=last)
    return out


def parse_faults(spec: str, *, shards: list[str] | None = None) -> FaultPlan:
    """Parse a SPEC (module docstring) into a :class:`FaultPlan`. ``shards``, the served file names in shard
    order, lets numbers and names be checked now. Raises ValueError with one line naming the bad rule."""
    if not isinstance(spec, str):
        raise TypeError(f"faults must be a SPEC string, got {type(spec).__name__}")
    rules, caps = [], {"conn_rate": None, "link_rate": None, "busy": None}
    for raw in spec.split(";"):
        rule = "".join(raw.split())
        if not rule:
            continue
        left, eq, right = rule.partition("=")
        if not eq or not left or not right:
            raise ValueError(f"fault {rule!r}: write SELECTOR=FAULT (e.g. 2=status:404) or conn=, link=, busy=")
        if left in SERVER_WIDE:
            if left == "busy":
                k, colon, rate = right.partition(":")
                if not colon:
                    raise ValueError(f"fault {rule!r}: write busy=K:RATE (e.g. busy=8:1MiB/s)")
                caps["busy"] = (parsing.parse_int(k, f"fault {rule!r}: K", min=1, max=100000), _rate(rate, rule))
            else:
                caps[f"{left}_rate"] = _rate(right, rule)
            continue
        rules.append(Rule(fault=parse_fault(right, rule), **_selector(left, rule, shards)))
    return FaultPlan(tuple(rules), spec=spec, **caps)
