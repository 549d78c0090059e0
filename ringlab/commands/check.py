"""``ringlab check``: grade your exercise files, or show progress over all of them."""

from __future__ import annotations

import argparse

from ringlab.check import EXERCISES, grade, load
from ringlab.check.loader import exercise_dir


def progress_table() -> str:
    """Where the exercises are loaded from, then one line per exercise: id, card, status, title."""
    from ringlab.check.topics import progress

    return f"exercises in {exercise_dir()}\n{progress()}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ringlab check", description=__doc__)
    parser.add_argument("exercise", nargs="?", help=f"exercise id: {', '.join(sorted(EXERCISES))}")
    parser.add_argument("--file", help="grade this file instead of exercises/<exercise>.py")
    parser.add_argument("--all", action="store_true", help="grade every exercise and print a progress table")
    args = parser.parse_args(argv)
    if args.all:
        print(progress_table())
        return 0
    if not args.exercise:
        parser.error("name an exercise (e.g. ex01) or use --all")
    if args.exercise not in EXERCISES:
        parser.error(f"unknown exercise {args.exercise!r}; choose from {', '.join(sorted(EXERCISES))}")
    if args.file:
        try:
            fn = load(args.exercise, args.file)
        except Exception as exc:  # missing file, syntax error, missing function: say which
            parser.exit(2, f"ringlab check: cannot load {args.file}: {type(exc).__name__}: {exc}\n")
        result = grade(args.exercise, fn)
    else:
        result = grade(args.exercise)
    print(result)
    return 0 if result.passed else 1
