"""The learner's practice record: ``$XDG_STATE_HOME/ringlab/practice.json`` (``~/.local/state`` by default).

The file is JSON::

    {"version": 1,
     "cards": {"05": {"attempts": 3, "right": 2, "wrong": 1, "score": 0.8, "last": "2026-12-01T12:00:00Z"}},
     "mistakes": [{"card": "05", "ask": "total", "mistake": "GB vs GiB confusion ...", "answer": "40 GB",
                   "expected": 42949672960.0, "seed": 7, "at": "..."}],      # the newest MAX_MISTAKES
     "sessions": [{"seed": 7, "cards": ["05", "08"], "score": 0.75, "mock": false, "at": "..."}]}

Writes are atomic: the new content goes to a temporary file in the same folder, is flushed and fsync'ed,
then ``os.replace``-d over the old one, so a kill at any moment leaves the old record or the new one,
never half of one. Sessions change the record through :func:`update`, which holds an exclusive
``fcntl.flock`` on ``practice.json.lock`` while it reads the record, applies the change and writes it:
two sessions at once each add their cards to what the other saved (where ``fcntl`` is missing, as on
Windows, there is no lock and the last writer wins).

Nothing is thrown away. A record that cannot be read (not UTF-8, not JSON, nested too deep, larger than
:data:`MAX_BYTES`, a directory, not a record of this version) is renamed ``practice.json.corrupt``
(``.corrupt.1`` ... when that exists) with a note, and a new record starts; a record with some
malformed entries (``{"05": 5}``) keeps its good entries, and a copy of the original goes to the same
``.corrupt`` name. A file where the state folder should be is set aside the same way. A record that
exists but cannot be read (permissions) is never overwritten: :func:`update` raises OSError, and the
session keeps its cards and writes them to a fallback file (:func:`save_fallback`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

VERSION = 1
MAX_MISTAKES = 200
MAX_SESSIONS = 100
MAX_BYTES = 4 * 2**20  # a record holds at most 99 cards, 200 mistakes and 100 sessions: well under 1 MiB
LOCK_WAIT_S = 10.0  # another session holds the lock only while it reads and writes the record
Warn = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


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


# -- what a record may hold ------------------------------------------------------------------------------
def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10**9


def _real(v, lo=-math.inf, hi=math.inf) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi


def _text(v, limit=1000) -> bool:
    return isinstance(v, str) and len(v) <= limit


def _card_entry(v) -> bool:
    return (isinstance(v, dict) and all(_count(v.get(k)) for k in ("attempts", "right", "wrong"))
            and (v.get("score") is None or _real(v.get("score"), 0, 1)) and _text(v.get("last", ""), 40))


def _seed(v) -> bool:
    return v is None or isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64


def _mistake(v) -> bool:
    return (isinstance(v, dict) and all(_text(v.get(k)) for k in ("card", "ask", "answer", "at"))
            and (v.get("mistake") is None or _text(v.get("mistake")))
            and (v.get("expected") is None or _real(v.get("expected"))) and _seed(v.get("seed")))


def _session(v) -> bool:
    return (isinstance(v, dict) and _seed(v.get("seed"))
            and isinstance(v.get("cards"), list) and all(_text(c, 8) for c in v["cards"])
            and (v.get("score") is None or _real(v.get("score"), 0, 1)) and isinstance(v.get("mock", False), bool)
            and _text(v.get("at")))


def _salvage(data) -> tuple[dict | None, int]:
    """(the record with its well-formed entries, how many entries were dropped); (None, 0) when ``data`` is not a
    record of this version at all."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None, 0
    clean, dropped = empty(), 0
    cards = data.get("cards", {})
    if isinstance(cards, dict):
        clean["cards"] = {k: v for k, v in cards.items() if _text(k, 8) and _card_entry(v)}
        dropped += len(cards) - len(clean["cards"])
    else:
        dropped += 1
    for key, ok in (("mistakes", _mistake), ("sessions", _session)):
        items = data.get(key, [])
        if isinstance(items, list):
            clean[key] = [v for v in items if ok(v)]
            dropped += len(items) - len(clean[key])
        else:
            dropped += 1
    return clean, dropped


# -- setting aside -----------------------------------------------------------------------------------------
def _aside_name(path: Path) -> Path:
    aside = path.with_name(path.name + ".corrupt")
    n = 0
    while aside.exists() or aside.is_symlink():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt.{n}")
    return aside


def _set_aside(path: Path, why: str, warn: Warn, copy: bool = False) -> None:
    """Rename ``path`` (or copy it, with ``copy``) to a free ``.corrupt`` name and say so. Raises OSError when it
    cannot, so that the caller never writes over what it could not keep."""
    aside = _aside_name(path)
    if copy:
        shutil.copy2(path, aside)
    else:
        os.rename(path, aside)
    warn(f"ringlab practice: note: {path} {why}; {'copied' if copy else 'moved'} it to {aside}")


def _folder(path: Path, warn: Warn, create: bool) -> bool:
    """Whether the record's folder exists (created with ``create``); a file in its place is set aside."""
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        _set_aside(folder, "is a file where ringlab keeps its state folder", warn)
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return folder.is_dir()


class Unreadable(OSError):
    """The record exists but cannot be read (permissions, I/O): it is left as it is and never written over."""


def _read(path: Path, warn: Warn) -> dict:
    """The record at ``path``, or a fresh one; a bad record is set aside (see the module doc). Raises
    :class:`Unreadable`, or OSError when a bad record cannot be set aside."""
    try:
        if path.is_dir():
            _set_aside(path, "is a folder, not a practice record", warn)
            return empty()
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return empty()
    except (IsADirectoryError, NotADirectoryError):
        raise
    except OSError as exc:
        raise Unreadable(exc.errno, f"cannot read the practice record {path}: {exc.strerror or exc}") from exc
    problem, data = None, None
    if len(raw) > MAX_BYTES:
        problem = f"is larger than {MAX_BYTES:,} bytes, too large for a practice record"
    else:
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except UnicodeDecodeError:
            problem = "is not UTF-8 text"
        except RecursionError:
            problem = "nests JSON too deep for a practice record"
        except ValueError:  # JSONDecodeError, NaN/Infinity, integers of thousands of digits
            problem = "is not valid JSON"
    clean, dropped = _salvage(data) if problem is None else (None, 0)
    if problem is None and clean is None:
        problem = f"is not a version {VERSION} practice record"
    if problem:
        _set_aside(path, problem + "; a new record starts", warn)
        return empty()
    if dropped:
        _set_aside(path, f"had {dropped} malformed entr{'y' if dropped == 1 else 'ies'}, left out; "
                         "the rest is kept", warn, copy=True)
    return clean


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a practice record holds")


@contextlib.contextmanager
def _locked(path: Path, required: bool = True):
    """Hold an exclusive lock on ``path``'s ``.lock`` file (waiting up to :data:`LOCK_WAIT_S`); TimeoutError, an
    OSError, when another session keeps it longer. A reader (``required=False``) goes on without the lock
    when the lock file cannot be created (a read-only folder)."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock
        yield
        return
    try:
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        if required:
            raise
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another ringlab session has held {path}.lock for {LOCK_WAIT_S:g} s") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


# -- the API ---------------------------------------------------------------------------------------------
def load(path: Path | None = None, warn: Warn = _stderr) -> dict:
    """The record at ``path`` (default :func:`state_path`), or an empty one. Never raises: a bad record is set
    aside with a note to ``warn`` (stderr by default); one that cannot be read is reported and left alone."""
    path = Path(path) if path else state_path()
    try:
        if not _folder(path, warn, create=False):
            return empty()
        with _locked(path, required=False):
            return _read(path, warn)
    except OSError as exc:
        warn(f"ringlab practice: note: {exc.strerror if isinstance(exc, Unreadable) else exc}; "
             "showing an empty record")
        return empty()


def update(change: Callable[[dict], None], path: Path | None = None, warn: Warn = _stderr) -> Path:
    """Apply ``change`` (a function that edits a record in place) to the record at ``path`` under the lock:
    read the newest record, change it, write it atomically. Returns the path written. Raises OSError
    (the record is then as it was) when the folder cannot be created, the record cannot be read or
    written, or another session holds the lock too long."""
    path = Path(path) if path else state_path()
    _folder(path, warn, create=True)
    with _locked(path):
        data = _read(path, warn)
        change(data)
        return save(data, path)


def save(data: dict, path: Path | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, ``os.replace``); creates the folder.
    Raises OSError. Sessions use :func:`update`, which merges with what others saved."""
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


def save_fallback(data: dict) -> Path | None:
    """Write ``data`` to a new file in the temporary folder when the record cannot be written; its path, or None
    when that fails too."""
    try:
        fd, name = tempfile.mkstemp(prefix=f"ringlab-practice-{datetime.now():%Y%m%d-%H%M%S}-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        return Path(name)
    except OSError:
        return None


def reset(path: Path | None = None) -> bool:
    """Delete the record (under the lock); True if there was one. Raises OSError when it cannot."""
    path = Path(path) if path else state_path()
    if not path.parent.is_dir():
        return False
    with _locked(path):
        try:
            path.unlink()
        except FileNotFoundError:
            return False
    return True


def record_card(data: dict, card_id: str, right: int, wrong: int, score: float | None, mistakes: list[dict],
                seed: int | None) -> None:
    """Add one card to ``data`` in place: counts, the latest rubric ``score`` (0..1) and its mistakes."""
    entry = data["cards"].setdefault(card_id, {"attempts": 0, "right": 0, "wrong": 0, "score": None, "last": ""})
    entry["attempts"] += 1
    entry["right"] += right
    entry["wrong"] += wrong
    if score is not None:
        entry["score"] = round(score, 4)
    entry["last"] = now()
    data["mistakes"].extend({**m, "card": card_id, "seed": seed, "at": now()} for m in mistakes)
