"""Find and import the learner's exercise files (or, for CI, the worked solutions).

A topic's exercises live in one file, ``exercises/NN_slug.py`` (:mod:`ringlab.course.registry`).

The folder is ``$RINGLAB_EXERCISES`` if set, else the first ``exercises/`` folder found in
the current directory or its parents, else the one next to the installed package. Setting
``RINGLAB_USE_SOLUTIONS=1`` loads from ``solutions/`` instead, so the tests can run every
notebook's grader cells against the reference answers.
"""

from __future__ import annotations

import importlib.util
import os
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
    return exercise_dir() / f"{get_exercise(exercise_id).module}.py"


def load(exercise_id: str, file: str | os.PathLike | None = None):
    """Import the learner's function for ``exercise_id`` from ``file`` (default: its exercise file).

    Raises ValueError for an unknown id, FileNotFoundError when the file is missing, and
    AttributeError naming the function when the file does not define it.
    """
    ex = get_exercise(exercise_id)
    path = Path(file) if file is not None else exercise_path(exercise_id)
    if not path.is_file():
        raise FileNotFoundError(f"{exercise_id}: no exercise file at {path}")
    spec = importlib.util.spec_from_file_location(f"ringlab_learner_{ex.module}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{exercise_id}: {path} is not a Python file (expected a .py file defining {ex.function}())")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, ex.function):
        raise AttributeError(f"{path} does not define {ex.function}()")
    return getattr(module, ex.function)
