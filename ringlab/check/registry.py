"""All exercises, collected from the topics' grader modules ``ringlab.check.graders.<slug>``.

The topic registry (:mod:`ringlab.course.registry`) names each topic's exercises; a topic's grader
module defines ``EXERCISES``, a tuple of :class:`~ringlab.check.exercise.Exercise`, for exactly
those ids and functions. Old ids (``ex08``) are accepted by :func:`get_exercise` with a note.
"""

from __future__ import annotations

import importlib
import warnings

from ringlab.course import TOPICS, resolve_exercise

from .exercise import Exercise


class RenamedIdWarning(UserWarning):
    """An old exercise or card id (``ex08``, ``P5``) was used; the message names the new one."""


def _collect() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for topic in TOPICS:
        if not topic.exercises:
            continue
        module = importlib.import_module(topic.grader_module)
        listed = {ex.id: ex.function for ex in topic.exercises}
        graded = {ex.id: ex.function for ex in module.EXERCISES}
        if graded != listed:
            raise RuntimeError(f"{topic.grader_module} grades {graded}; the registry lists {listed} for topic {topic.id}")
        found.update((ex.id, ex) for ex in module.EXERCISES)
    return dict(sorted(found.items()))


EXERCISES: dict[str, Exercise] = _collect()


def get_exercise(exercise_id: str) -> Exercise:
    """The :class:`Exercise` for ``exercise_id`` ("05a"; an old id such as "ex08" warns with the new id;
    a topic number with one exercise, "05", names it). ValueError listing the known ids otherwise."""
    new_id, note = resolve_exercise(exercise_id)
    if note:
        warnings.warn(note, RenamedIdWarning, stacklevel=2)
    return EXERCISES[new_id]
