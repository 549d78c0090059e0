"""All exercises, collected from the ``*_graders`` modules of this package.

Each topic adds a module ``ringlab/check/<topic>_graders.py`` that defines ``EXERCISES``, a
tuple of :class:`~ringlab.check.exercise.Exercise`; nothing else needs editing to register it.
"""

from __future__ import annotations

import importlib
import pkgutil

from .exercise import Exercise


def _collect() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    package = importlib.import_module("ringlab.check")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.endswith("_graders"):
            module = importlib.import_module(f"ringlab.check.{info.name}")
            for ex in module.EXERCISES:
                if ex.id in found:
                    raise RuntimeError(f"exercise id {ex.id} is registered twice ({info.name})")
                found[ex.id] = ex
    return dict(sorted(found.items()))


EXERCISES: dict[str, Exercise] = _collect()


def get_exercise(exercise_id: str) -> Exercise:
    """The :class:`Exercise` for ``exercise_id``; ValueError listing the known ids otherwise."""
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise ValueError(f"unknown exercise {exercise_id!r}; known: {', '.join(sorted(EXERCISES))}") from None
