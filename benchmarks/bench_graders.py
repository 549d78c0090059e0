"""Time to grade each exercise's worked solution (the budget is 5 s per exercise on a 2-core laptop).

The first grade of each exercise is a warm-up (it pays one-time imports such as torch or
triton); the figure is the best of ``--repeat`` timed runs after it.

Usage: python benchmarks/bench_graders.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time

from ringlab.check import EXERCISES, grade


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--isolated", action="store_true",
                        help="grade as `ringlab check` does and print the seconds the solution's code ran in the child "
                             "(REFERENCE_SECONDS in ringlab/check/isolated.py) and the time limit derived from it")
    args = parser.parse_args()
    os.environ["RINGLAB_USE_SOLUTIONS"] = "1"
    if args.isolated:
        from ringlab.check.isolated import grade_isolated, time_limit

        print(f"{'exercise':<8} {'code s':>7} {'limit s':>8}  status")
        for exercise_id in EXERCISES:
            result = grade_isolated(exercise_id, timeout=86400.0)
            print(f"{exercise_id:<8} {result.seconds:>7.2f} {time_limit(exercise_id):>8g}  {result.status}")
        return
    print(f"{'exercise':<8} {'cases':>6} {'grade s':>8}  status")
    for exercise_id in EXERCISES:
        grade(exercise_id)
        best, result = float("inf"), None
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = grade(exercise_id)
            best = min(best, time.perf_counter() - start)
        print(f"{exercise_id:<8} {result.cases:>6} {best:>8.2f}  {result.status}{'' if best < 5 else '  OVER BUDGET'}")


if __name__ == "__main__":
    main()
