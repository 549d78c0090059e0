"""``ringlab check``: grade your exercise files, or show progress over all of them.

Name an exercise (``05a``), a topic by number or slug (``05``, ``kv_cache``: all its exercises),
or an old id (``ex08``: graded as ``05a``, with a note).

Your code runs in a sandboxed child process and the grader here, on what your functions return (see
``ringlab.check.isolated``), so code that loops forever, calls ``sys.exit`` or crashes the interpreter is
reported as such. Each exercise's time limit counts your code's running time only: ten times the
reference solution's, at least 30 s (``--timeout`` sets one for all); the limit used is printed. An
untouched exercise is reported without running it. Exit status: 0 passed, 1 wrong or not attempted,
2 usage error, 3 your code timed out, exited or crashed (the message says which); 130 or 143 when
interrupted (Ctrl-C, SIGTERM), after stopping your code.
"""

from __future__ import annotations

import os
import signal
import sys

from ringlab import cli_args
from ringlab.check import EXERCISES
from ringlab.check.isolated import grade_isolated, time_limit
from ringlab.check.loader import exercise_dir
from ringlab.check.topics import Progress
from ringlab.course import exercise_refs, get_topic, resolve_exercise
from ringlab.textfmt import wrap_lines

EXIT_NOT_GRADED = 3


def progress_table(timeout: float | None = None) -> str:
    """Where the exercises are loaded from, then one line per exercise: id, topic, status, title.

    ``timeout``: seconds each exercise's code may run (default: each exercise's :func:`time_limit`).
    """
    rows = [(ex, grade_isolated(ex_id, timeout=timeout)) for ex_id, ex in EXERCISES.items()]
    return f"exercises in {exercise_dir()}\n{Progress(rows)}"


def _exit_on(signum, frame):
    """SIGTERM/SIGHUP: leave through the normal exit path, which stops the child running the learner's code."""
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is not None and signal.getsignal(signum) in (signal.SIG_DFL, None):
            try:
                signal.signal(signum, _exit_on)
            except ValueError:  # not the main thread (a test calling main): the caller owns signals
                pass
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("ringlab check: interrupted; your code was stopped", file=sys.stderr)
        return 130


def _main(argv: list[str]) -> int:
    parser = cli_args.ArgumentParser(prog="ringlab check", description=__doc__.splitlines()[0])
    parser.add_argument("exercise", nargs="?", type=cli_args.text(max_len=64),
                        help=f"exercise id ({', '.join(sorted(EXERCISES))}), or a topic number or slug")
    parser.add_argument("--file", type=cli_args.text(), help="grade this file instead of exercises/<exercise>.py")
    parser.add_argument("--all", action="store_true", help="grade every exercise and print a progress table")
    parser.add_argument("--timeout", type=cli_args.duration(min=0.1, min_open=False, max=86400.0), default=None,
                        help="seconds your code may run per exercise (default: 10x the reference solution's "
                             "running time, at least 30 s; 90s, 5min also work)")
    args = parser.parse_args(argv)
    if args.all:
        if args.exercise or args.file:
            extra = f"the exercise {args.exercise!r}" if args.exercise else "--file"
            parser.error(f"--all grades every exercise; leave out {extra} (or drop --all)")
        print(progress_table(args.timeout))
        return 0
    if not args.exercise:
        parser.error("name an exercise (e.g. 01a), a topic (e.g. 05 or kv_cache) or use --all")
    ids = _exercise_ids(parser, args.exercise)
    if args.file:
        if not os.path.isfile(args.file):
            parser.exit(2, f"ringlab check: error: argument --file: no such file: {args.file!r}\n")
    status = 0
    for exercise_id in ids:
        limit = time_limit(exercise_id) if args.timeout is None else args.timeout
        print(f"grading {exercise_id} (time limit: {limit:g} s of your code's running time)", flush=True)
        result = grade_isolated(exercise_id, args.file, timeout=args.timeout)
        print(wrap_lines(str(result), hang="  "))  # a learner's terminal: at most 100 columns
        if result.jail:
            print(f"note: your code could write to the repository here ({result.jail})")
        if result.outcome != "graded":
            status = max(status, EXIT_NOT_GRADED)
        elif not result.passed:
            status = max(status, 1)
    return status


def _exercise_ids(parser, name: str) -> list[str]:
    """The exercise ids ``name`` stands for: itself, its new id (noted on stderr), or a topic's exercises."""
    if name in exercise_refs():
        return [name]
    try:
        new_id, note = resolve_exercise(name)
    except ValueError:
        try:
            topic = get_topic(name)
        except ValueError:
            parser.error(f"unknown exercise or topic {name!r}; exercises: {', '.join(sorted(EXERCISES))}; "
                         "topics: a number (01..) or a slug (ring_allreduce, kv_cache, ...)")
        return [ex.id for ex in topic.exercises]
    if note:
        print(f"note: {note}", file=sys.stderr)
    return [new_id]
