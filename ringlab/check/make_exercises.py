"""Generate ``exercises/`` from ``solutions/``: each solution region becomes a stub.

Lines from ``### BEGIN SOLUTION`` to ``### END SOLUTION`` (the nbgrader convention) are
replaced by one ``raise NotImplementedError("exNN: ...")`` at the marker's indentation, so
signatures, docstrings and imports stay as they are.

Usage: ``python -m ringlab.check.make_exercises [--check]`` from the repository root;
``--check`` writes nothing and exits 1 if a committed exercise differs from what would be generated.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def make_stub(source: str, exercise_id: str) -> str:
    """Return ``source`` with every solution region replaced by a NotImplementedError stub.

    Raises ValueError for an unmatched or nested marker (naming the line).
    """
    out, inside = [], False
    for lineno, line in enumerate(source.splitlines(keepends=True), 1):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"line {lineno}: nested {BEGIN}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
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
    """Map each exercise path to the text generated from its solution file."""
    result = {}
    for path in sorted(solutions.glob("ex[0-9][0-9]_*.py")):
        exercise_id = re.match(r"(ex\d\d)_", path.name).group(1)
        result[exercises / path.name] = make_stub(path.read_text(), exercise_id)
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
