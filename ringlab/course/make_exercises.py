"""Generate ``exercises/`` from ``solutions/``: each solution region becomes a stub.

Lines from ``### BEGIN SOLUTION`` to ``### END SOLUTION`` (the nbgrader convention) are
replaced by one ``raise NotImplementedError("NNx: ...")`` at the marker's indentation, naming the
exercise whose function holds the region, so signatures, docstrings and imports stay as they are.
A topic's file is ``solutions/NN_slug.py`` (see :mod:`ringlab.course.registry`).

Usage: ``python -m ringlab.course.make_exercises [--check]`` from the repository root;
``--check`` writes nothing and exits 1 if a committed exercise differs from what would be generated.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .registry import TOPICS

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


_TOP_LEVEL = re.compile(r"^(?:def|class)\s+(\w+)")


def make_stub(source: str, exercise_ids: str | dict[str, str]) -> str:
    """Return ``source`` with every solution region replaced by a NotImplementedError stub.

    ``exercise_ids`` is the id the stubs name, or a map from top-level function (or class) name to
    exercise id for a file holding several exercises (a region names the definition it sits in;
    a region outside any listed definition names them all). Raises ValueError for an unmatched or
    nested marker (naming the line).
    """
    ids = exercise_ids if isinstance(exercise_ids, dict) else {}
    fallback = exercise_ids if isinstance(exercise_ids, str) else "/".join(dict.fromkeys(ids.values()))
    out, inside, current = [], False, None
    for lineno, line in enumerate(source.splitlines(keepends=True), 1):
        stripped = line.strip()
        top = _TOP_LEVEL.match(line)
        if top:
            current = top.group(1)
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"line {lineno}: nested {BEGIN}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            exercise_id = ids.get(current, fallback)
            out.append(f'{indent}raise NotImplementedError("{exercise_id}: replace this line with your code")\n')
        elif stripped == END:
            if not inside:
                raise ValueError(f"line {lineno}: {END} without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{BEGIN} without {END}")
    return "".join(out)


def generate(solutions: Path, exercises: Path) -> dict[Path, str]:
    """Map each registered topic's exercise path to the text generated from its solution file.

    Raises FileNotFoundError naming a registered topic whose solution file is missing.
    """
    result = {}
    for topic in TOPICS:
        if not topic.exercises:
            continue
        path = solutions / Path(topic.solution_file).name
        if not path.is_file():
            raise FileNotFoundError(f"topic {topic.id}: no solution file {path}")
        ids = {ex.function: ex.id for ex in topic.exercises}
        result[exercises / path.name] = make_stub(path.read_text(), ids)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="repository root holding solutions/ and exercises/")
    parser.add_argument("--check", action="store_true", help="exit 1 if exercises/ is out of date; write nothing")
    args = parser.parse_args(argv)
    root = Path(args.root)
    stale = []
    for path, text in generate(root / "solutions", root / "exercises").items():
        if not path.exists() or path.read_text() != text:
            stale.append(path)
            if not args.check:
                path.parent.mkdir(exist_ok=True)
                path.write_text(text)
    verb = "out of date" if args.check else "written"
    for path in stale:
        print(f"{verb}: {path}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
