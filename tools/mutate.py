"""A mutation pass: does each meaningful one-line change to the code make some test fail?

Each mutation in the list (``tools/mutations.toml`` by default) names a module, a snippet of its source, the
snippet to put in its place and the tests that should notice. The pass copies the tree once into a temporary
folder (the working tree is never touched: others may be editing it), then for each mutation writes the mutated
module into the copy, runs the mutation's tests there with a timeout, and puts the module back. A mutation is

- **killed** when the tests fail (or run past the timeout, reported as ``timeout``);
- **survived** when they pass: a hole in the tests, unless the list marks it ``equivalent`` (the change keeps
  the behaviour, and it is kept to show that the pass tells the two apart);
- **stale** when its snippet no longer occurs exactly once in the module (the code moved on: update the list);
- **baseline-fail** when its tests already fail on the unmutated copy (nothing can be judged).

Kill rate = killed / (killed + survived), over the non-equivalent mutations. The exit status is 0 when every
non-equivalent mutation was killed and none is stale, 1 otherwise, 2 for bad arguments.

The tests run as ``python -m pytest -x -q`` (without the nbval plugin) in the copy with ``PYTHONPATH`` set to it,
so ``import ringlab`` (also in subprocesses the tests start) finds the mutated copy before the editable install,
and with bytecode writing off, so a mutation of the same length written within the same second is never served
from a stale ``.pyc``.

Usage::

    .venv/bin/python tools/mutate.py                      # every mutation in tools/mutations.toml
    .venv/bin/python tools/mutate.py --only serving/      # those whose module or note contains the text
    .venv/bin/python tools/mutate.py --jobs 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from queue import Queue

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LIST = ROOT / "tools" / "mutations.toml"
SKIPPED = {".git", ".venv", ".venv-latest", "test-artifacts", ".pytest_cache", ".hypothesis", "__pycache__",
           ".ipynb_checkpoints", "build", "dist"}


@dataclass(frozen=True)
class Mutation:
    """One change: in ``module`` (a path relative to the root) replace ``original`` (which must occur exactly once)
    by ``mutated``; ``tests``: pytest arguments (paths or node ids, relative to the root)."""

    module: str
    original: str
    mutated: str
    note: str
    tests: tuple[str, ...]
    equivalent: bool = False

    @property
    def name(self) -> str:
        return f"{self.module}: {self.note}"


@dataclass
class Outcome:
    mutation: Mutation
    status: str  # killed | timeout | survived | stale | baseline-fail | error
    seconds: float = 0.0
    detail: str = field(default="", repr=False)


def load(path: Path) -> list[Mutation]:
    """The mutations of a TOML list: ``[defaults.tests]`` maps a module path (or a folder prefix) to the tests
    run for its mutations; each ``[[mutation]]`` has ``module``, ``original``, ``mutated``, ``note`` and may
    have ``tests`` (replacing the defaults) and ``equivalent = true``. Raises ValueError for a malformed entry."""
    data = tomllib.loads(path.read_text())
    defaults = data.get("defaults", {}).get("tests", {})
    out = []
    for i, entry in enumerate(data.get("mutation", [])):
        missing = {"module", "original", "mutated", "note"} - set(entry)
        if missing:
            raise ValueError(f"{path.name}: mutation {i + 1} lacks {', '.join(sorted(missing))}")
        if entry["original"] == entry["mutated"]:
            raise ValueError(f"{path.name}: mutation {i + 1} ({entry['note']}) changes nothing")
        tests = entry.get("tests")
        if tests is None:
            prefixes = [p for p in defaults if entry["module"].startswith(p)]
            if not prefixes:
                raise ValueError(f"{path.name}: mutation {i + 1} ({entry['module']}) names no tests and no "
                                 "[defaults.tests] prefix covers its module")
            tests = defaults[max(prefixes, key=len)]
        out.append(Mutation(entry["module"], entry["original"], entry["mutated"], entry["note"], tuple(tests),
                            bool(entry.get("equivalent", False))))
    return out


def tree_files(root: Path) -> list[Path]:
    """Files to copy: git's tracked and untracked-but-not-ignored files when ``root`` is a checkout (so work in
    progress is included), else everything outside :data:`SKIPPED`."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=True, timeout=60).stdout
        names = [n for n in listed.decode().split("\0") if n]
    except (OSError, subprocess.SubprocessError):
        names = [str(p.relative_to(root)) for p in root.rglob("*")
                 if p.is_file() and not SKIPPED & set(p.relative_to(root).parts)]
    return [Path(n) for n in names if (root / n).is_file() and not SKIPPED & set(Path(n).parts)]


def copy_tree(root: Path, files: list[Path], dest: Path) -> Path:
    for name in files:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, dest / name)
    return dest


def run_tests(copy: Path, tests: tuple[str, ...], timeout: float) -> tuple[str, str]:
    """``("pass" | "fail" | "timeout" | "error", output tail)`` of the tests in ``copy``."""
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    # nbval's plugin is left out (no mutation test runs notebooks; importing it costs seconds per run); the timeout
    # plugin is named so that it also loads when the caller turned plugin autoloading off
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:nbval", "-p", "timeout",
           "-o", "addopts=", "--timeout", str(int(timeout)), *tests]
    proc = subprocess.Popen(cmd, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except BaseException as exc:  # the timeout, or this pass interrupted: end the run's whole process group
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        if not isinstance(exc, subprocess.TimeoutExpired):
            raise
        return "timeout", out[-2000:]
    # pytest: 0 passed, 1 some test failed; 2 interrupted (a collection error: an import of the mutated module
    # failed, which also counts as noticed); 3-5: internal error, usage error, nothing collected.
    return {0: "pass", 1: "fail", 2: "fail"}.get(proc.returncode, "error"), out[-2000:]


def judge(mutation: Mutation, copy: Path, timeout: float) -> Outcome:
    path = copy / mutation.module
    if not path.is_file():
        return Outcome(mutation, "stale", detail=f"{mutation.module} does not exist")
    source = path.read_text()
    found = source.count(mutation.original)
    if found != 1:
        return Outcome(mutation, "stale", detail=f"the original occurs {found} times in {mutation.module}")
    start = time.monotonic()
    try:
        path.write_text(source.replace(mutation.original, mutation.mutated))
        verdict, tail = run_tests(copy, mutation.tests, timeout)
    finally:
        path.write_text(source)
    status = {"fail": "killed", "timeout": "timeout", "pass": "survived", "error": "error"}[verdict]
    return Outcome(mutation, status, time.monotonic() - start, tail)


def run_pass(mutations: list[Mutation], root: Path, jobs: int = 1, timeout: float = 600.0,
             baseline: bool = True, progress=None) -> list[Outcome]:
    """Judge every mutation in copies of ``root`` (``jobs`` copies, one per worker); returns outcomes in order.
    With ``baseline``, each distinct test selection first runs on the unmutated copy."""
    files = tree_files(root)
    with tempfile.TemporaryDirectory(prefix="ringlab-mutate-") as tmp:
        copies: Queue[Path] = Queue()
        for j in range(max(1, jobs)):
            copies.put(copy_tree(root, files, Path(tmp) / f"copy{j}"))

        def with_copy(fn, *args):
            copy = copies.get()
            try:
                return fn(copy, *args)
            finally:
                copies.put(copy)

        broken: dict[tuple[str, ...], str] = {}
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            if baseline:
                selections = list(dict.fromkeys(m.tests for m in mutations))
                results = pool.map(lambda t: (t, with_copy(lambda c, t: run_tests(c, t, timeout), t)), selections)
                for tests, (verdict, tail) in results:
                    if verdict != "pass":
                        broken[tests] = tail
                        if progress:
                            progress(f"baseline {verdict}: {' '.join(tests)}\n{tail}")

            def one(m: Mutation) -> Outcome:
                if m.tests in broken:
                    outcome = Outcome(m, "baseline-fail", detail=broken[m.tests])
                else:
                    outcome = with_copy(lambda c, m: judge(m, c, timeout), m)
                if progress:
                    progress(f"{outcome.status:>13}  {outcome.seconds:6.1f} s  {m.name}")
                return outcome

            return list(pool.map(one, mutations))


def summary(outcomes: list[Outcome]) -> dict:
    """Counts by status, and the kill rate over the non-equivalent mutations that could be judged."""
    real = [o for o in outcomes if not o.mutation.equivalent]
    killed = sum(o.status in ("killed", "timeout") for o in real)
    survived = [o.mutation.name for o in real if o.status == "survived"]
    judged = killed + len(survived)
    return {
        "mutations": len(outcomes),
        "equivalent": len(outcomes) - len(real),
        "killed": killed,
        "survived": len(survived),
        "stale": sum(o.status == "stale" for o in outcomes),
        "baseline_fail": sum(o.status == "baseline-fail" for o in outcomes),
        "error": sum(o.status == "error" for o in outcomes),
        "kill_rate": killed / judged if judged else None,
        "survivors": survived,
        "equivalent_killed": [o.mutation.name for o in outcomes if o.mutation.equivalent and o.status != "survived"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", type=Path, default=DEFAULT_LIST, help="TOML list of mutations (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree to copy and mutate (default: this checkout)")
    parser.add_argument("--only", action="append", default=[],
                        help="keep mutations whose module or note contains this text (repeatable: any of them)")
    parser.add_argument("--jobs", type=int, default=1, help="mutations judged at once, each in its own copy")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test run (default: %(default)s)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated runs of each test selection")
    parser.add_argument("--json", type=Path, help="also write the outcomes and the summary to this file")
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= 64:
        parser.error(f"--jobs must be in 1..64, got {args.jobs}")
    if not args.timeout > 0:
        parser.error(f"--timeout must be > 0 seconds, got {args.timeout}")
    try:
        mutations = load(args.list)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        parser.error(f"--list {args.list}: {exc}")
    if args.only:
        mutations = [m for m in mutations if any(t in m.module or t in m.note for t in args.only)]
    if not mutations:
        parser.error("no mutation selected")
    # SIGTERM (a timeout, a killed job) unwinds like Ctrl+C: the run in progress ends and the copies are removed
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"{len(mutations)} mutation(s) from {args.list}", flush=True)
    try:
        outcomes = run_pass(mutations, args.root.resolve(), args.jobs, args.timeout, not args.no_baseline,
                            progress=lambda line: print(line, flush=True))
    finally:
        signal.signal(signal.SIGTERM, previous)
    stats = summary(outcomes)
    rate = "n/a" if stats["kill_rate"] is None else f"{stats['kill_rate']:.1%}"
    print(f"\nkilled {stats['killed']} of {stats['killed'] + stats['survived']} (kill rate {rate}); "
          f"{stats['equivalent']} equivalent, {stats['stale']} stale, {stats['baseline_fail']} baseline-fail, "
          f"{stats['error']} error")
    for name in stats["survivors"]:
        print(f"SURVIVED: {name}")
    for o in outcomes:
        if o.status in ("stale", "error"):
            print(f"{o.status.upper()}: {o.mutation.name}: {o.detail[-300:]}")
    for name in stats["equivalent_killed"]:
        print(f"equivalent but killed (a test depends on the form, or the mutation is not equivalent): {name}")
    if args.json:
        args.json.write_text(json.dumps({"summary": stats, "outcomes": [
            {**asdict(o.mutation), "status": o.status, "seconds": round(o.seconds, 2)} for o in outcomes]},
            indent=1) + "\n")
    ok = not stats["survivors"] and not stats["stale"] and not stats["baseline_fail"] and not stats["error"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
