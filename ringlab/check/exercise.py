"""The :class:`Exercise` record every topic's grader module registers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ringlab.course import Topic, topic_of_exercise

from .result import GradeResult


@dataclass(frozen=True)
class Exercise:
    """One exercise ``id`` ("05a"): the learner writes ``function`` in its topic's exercise file;
    ``grader(fn)`` returns a GradeResult; ``hints`` go from gentlest to most telling.

    Raises ValueError when ``id`` is not a topic number and a letter of a registered topic.
    """

    id: str
    function: str
    title: str
    grader: Callable[[Callable | None], GradeResult]
    hints: tuple[str, ...] = field(default=())

    def __post_init__(self):
        topic_of_exercise(self.id)

    @property
    def topic(self) -> Topic:
        return topic_of_exercise(self.id)

    @property
    def file(self) -> str:
        """The learner's file, relative to the repository root, for an exercise not written in the topic's
        Python file (19b: ``go/shards/exercise/download.go``); ``""`` for the others."""
        return next(ref.file for ref in self.topic.exercises if ref.id == self.id)

    @property
    def solution_file(self) -> str:
        """The worked solution of an exercise with its own :attr:`file`; ``""`` for the others."""
        return next(ref.solution_file for ref in self.topic.exercises if ref.id == self.id)

    @property
    def module(self) -> str:
        """The exercise file's stem, ``NN_slug`` (``exercises/NN_slug.py``)."""
        return self.topic.stem

    @property
    def card(self) -> str:
        return self.topic.card
