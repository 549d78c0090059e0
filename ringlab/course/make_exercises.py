"""Generate ``exercises/`` from ``solutions/``: each solution region becomes a stub.

Lines from ``### BEGIN SOLUTION`` to ``### END SOLUTION`` (the nbgrader convention) are
replaced by one ``raise NotImplementedError("NNx: ...")`` at the marker's indentation, naming the
exercise whose function holds the region, so signatures, docstrings and imports stay as they are.
A topic's file is ``solutions/NN_slug.py`` (see :mod:`ringlab.course.registry`).

An exercise written in Go (an ``ExerciseRef`` with ``file`` and ``solution_file``, 19b) follows the same rule
with Go's comment markers ``// BEGIN SOLUTION`` / ``// END SOLUTION`` (:func:`make_go_stub`).

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


GO_BEGIN, GO_END = "// BEGIN SOLUTION", "// END SOLUTION"
_GO_IMPORT = re.compile(r'^\t(?:(\w+) )?"([^"]+)"\n')


def make_go_stub(source: str, exercise_id: str, package: str) -> str:
    """Return the Go ``source`` with every solution region replaced, as :func:`make_stub` does for Python.

    A region inside a function (indented marker) becomes ``return errors.New("NNx: not implemented: ...")``,
    so the function must return only an ``error``; a region at the top level (the solution's helpers) is
    dropped. The package clause becomes ``package <package>``, imports the stub no longer uses are dropped
    and ``errors`` is imported, so the stub compiles. Raises ValueError for an unmatched or nested marker.
    """
    out, inside = [], False
    for lineno, line in enumerate(source.splitlines(keepends=True), 1):
        stripped = line.strip()
        if stripped == GO_BEGIN:
            if inside:
                raise ValueError(f"line {lineno}: nested {GO_BEGIN}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            if indent:
                stub = f"{exercise_id}: not implemented: replace this line with your code"
                out.append(f'{indent}return errors.New("{stub}")\n')
        elif stripped == GO_END:
            if not inside:
                raise ValueError(f"line {lineno}: {GO_END} without {GO_BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{GO_BEGIN} without {GO_END}")
    text = re.sub(r"(?m)^package \w+$", f"package {package}", "".join(out), count=1)
    text = re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"
    head, block, rest = re.split(r"(?ms)^import \(\n(.*?)^\)\n", text, maxsplit=1)
    code = re.sub(r'(?m)//.*$|"[^"\n]*"', "", rest)  # comments and strings use no package
    groups = []
    for n, group in enumerate(block.split("\n\n")):
        kept = {line for line in group.splitlines() if (m := _GO_IMPORT.match(line + "\n"))
                and re.search(rf"\b{m.group(1) or m.group(2).rsplit('/', 1)[-1]}\.", code)}
        if n == 0:  # the standard library's group
            kept.add('\t"errors"')
        if kept:
            groups.append("\n".join(sorted(kept, key=lambda line: line.split('"')[1])))
    imports = "\n\n".join(groups)
    return f"{head}import (\n{imports}\n)\n{rest}"


def generate(solutions: Path, exercises: Path) -> dict[Path, str]:
    """Map each registered topic's exercise path to the text generated from its solution file, and each Go
    exercise's ``file`` (under ``exercises``' parent) to the stub of its ``solution_file`` (under ``solutions``').

    Raises FileNotFoundError naming a registered topic whose solution file is missing.
    """
    result = {}
    for topic in TOPICS:
        if not topic.exercises:
            continue
        path = solutions / Path(topic.solution_file).name
        if not path.is_file():
            raise FileNotFoundError(f"topic {topic.id}: no solution file {path}")
        ids = {ex.function: ex.id for ex in topic.exercises if not ex.file}  # a Go exercise has its own file
        result[exercises / path.name] = make_stub(path.read_text(), ids)
        for ex in topic.exercises:
            if ex.file:
                go = solutions.parent / ex.solution_file
                if not go.is_file():
                    raise FileNotFoundError(f"exercise {ex.id}: no solution file {go}")
                target = exercises.parent / ex.file
                result[target] = make_go_stub(go.read_text(), ex.id, target.parent.name)
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
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    verb = "out of date" if args.check else "written"
    for path in stale:
        print(f"{verb}: {path}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
