"""The learner's practice record: ``$XDG_STATE_HOME/ringlab/practice.json`` (``~/.local/state`` by default).

The file is JSON::

    {"version": 1,
     "cards": {"05": {"attempts": 3, "right": 2, "wrong": 1, "score": 0.8, "last": "2026-12-01T12:00:00Z"}},
     "mistakes": [{"card": "05", "ask": "total", "mistake": "GB vs GiB confusion ...", "answer": "40 GB",
                   "expected": 42949672960.0, "seed": 7, "at": "..."}],      # the newest MAX_MISTAKES
     "sessions": [{"seed": 7, "cards": ["05", "08"], "score": 0.75, "at": "..."}]}

It is written atomically: the new content goes to a temporary file in the same folder, is flushed and
fsync'ed, then ``os.replace``-d over the old one (atomic on POSIX and Windows), so a kill at any moment
leaves either the old record or the new one, never half of one. An unreadable file is moved aside to
``practice.json.corrupt`` with a warning and a fresh record starts (nothing is silently overwritten).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

VERSION = 1
MAX_MISTAKES = 200
MAX_SESSIONS = 100


def state_path(environ=None) -> Path:
    """``$XDG_STATE_HOME/ringlab/practice.json``; ``~/.local/state/ringlab/practice.json`` when it is unset or
    not absolute (the XDG Base Directory spec says to ignore relative paths)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "ringlab" / "practice.json"


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def empty() -> dict:
    return {"version": VERSION, "cards": {}, "mistakes": [], "sessions": []}


def _valid(data) -> bool:
    return (isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("cards"), dict)
            and isinstance(data.get("mistakes"), list) and isinstance(data.get("sessions"), list))


def load(path: Path | None = None) -> dict:
    """The record at ``path`` (default :func:`state_path`), or an empty one if there is none. A corrupt file
    is renamed ``*.corrupt`` (a warning goes to stderr) and an empty record is returned."""
    path = Path(path) if path else state_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return empty()
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if not _valid(data):
        aside = path.with_name(path.name + ".corrupt")
        os.replace(path, aside)
        print(f"ringlab practice: warning: {path} was unreadable; moved it to {aside} and started afresh",
              file=sys.stderr)
        return empty()
    return data


def save(data: dict, path: Path | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, ``os.replace``); creates the folder."""
    path = Path(path) if path else state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {**data, "mistakes": data["mistakes"][-MAX_MISTAKES:], "sessions": data["sessions"][-MAX_SESSIONS:]}
    fd, tmp = tempfile.mkstemp(prefix=".practice-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def reset(path: Path | None = None) -> bool:
    """Delete the record; True if there was one."""
    path = Path(path) if path else state_path()
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def record_card(data: dict, card_id: str, right: int, wrong: int, score: float | None, mistakes: list[dict],
                seed: int | None) -> None:
    """Add one finished card to ``data`` in place: counts, the latest rubric ``score`` (0..1) and its mistakes."""
    entry = data["cards"].setdefault(card_id, {"attempts": 0, "right": 0, "wrong": 0, "score": None, "last": ""})
    entry["attempts"] += 1
    entry["right"] += right
    entry["wrong"] += wrong
    if score is not None:
        entry["score"] = round(score, 4)
    entry["last"] = now()
    data["mistakes"].extend({**m, "card": card_id, "seed": seed, "at": now()} for m in mistakes)
