"""Find and import the learner's exercise files (or, for CI, the worked solutions).

A topic's exercises live in one file, ``exercises/NN_slug.py`` (:mod:`ringlab.course.registry`); an exercise in
another language names its own file (19b: ``go/shards/exercise/download.go``, its solution in ``go/shards/solution/``).

The folder is ``$RINGLAB_EXERCISES`` if set, else the first ``exercises/`` folder found in
the current directory or its parents, else the one next to the installed package. Setting
``RINGLAB_USE_SOLUTIONS=1`` loads from ``solutions/`` instead, so the tests can run every
notebook's grader cells against the reference answers.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from .registry import get_exercise


def find_project_dir(name: str) -> Path:
    """The project folder ``name`` (``exercises``, ``solutions``, ``notebooks``): see the module docstring."""
    env = os.environ.get("RINGLAB_EXERCISES")
    if env and name == "exercises":
        return Path(env)
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / name).is_dir() and (folder / "ringlab").is_dir():
            return folder / name
    return Path(__file__).resolve().parents[2] / name


def exercise_dir() -> Path:
    """Folder the exercise files are loaded from (see the module docstring)."""
    return find_project_dir("solutions" if os.environ.get("RINGLAB_USE_SOLUTIONS") == "1" else "exercises")


def exercise_path(exercise_id: str) -> Path:
    """The learner's file for ``exercise_id`` (its solution under ``RINGLAB_USE_SOLUTIONS=1``): the topic's
    Python file, or for an exercise in another language (19b, Go) its own file in the repository."""
    ex = get_exercise(exercise_id)
    if ex.file:  # relative to the project holding the exercises (or solutions) folder
        use_solutions = os.environ.get("RINGLAB_USE_SOLUTIONS") == "1"
        return exercise_dir().parent / (ex.solution_file if use_solutions else ex.file)
    return exercise_dir() / f"{ex.module}.py"


@dataclass(frozen=True)
class SourceFile:
    """A learner's file in another language than Python (19b, Go): what :func:`load` gives its grader,
    which builds and runs it rather than importing it."""

    exercise: str
    path: Path


def load(exercise_id: str, file: str | os.PathLike | None = None):
    """Import the learner's function for ``exercise_id`` from ``file`` (default: its exercise file); for an
    exercise in another language (19b, Go), return the file as a :class:`SourceFile` for its grader.

    Raises ValueError for an unknown id, FileNotFoundError when the file is missing, and
    AttributeError naming the function when the file does not define it.
    """
    ex = get_exercise(exercise_id)
    path = Path(file) if file is not None else exercise_path(exercise_id)
    if not path.is_file():
        raise FileNotFoundError(f"{exercise_id}: no exercise file at {path}")
    if ex.file:
        return SourceFile(ex.id, path)
    spec = importlib.util.spec_from_file_location(f"ringlab_learner_{ex.module}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{exercise_id}: {path} is not a Python file (expected a .py file defining {ex.function}())")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, ex.function):
        raise AttributeError(f"{path} does not define {ex.function}()")
    return getattr(module, ex.function)
