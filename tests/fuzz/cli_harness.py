"""Run ``ringlab`` commands in-process with captured output and a time limit, and judge the outcome.

An invocation is judged:

``clear``      exit status 1, 2 or 3 and one line on stderr that names the option
``unclear``    a non-zero exit, but the message is several lines or does not name the option
``accepted``   exit status 0: a bad value was taken as if it were fine
``in range``   an edge value inside the option's range (its largest value, zero, a subnormal) that ran:
               the right outcome for such a value, counted apart from the bad values
``traceback``  an exception escaped, or stderr shows a traceback or ringlab's "internal error" line
``hang``       the call ran past its time limit (SIGALRM ends it)

The counts of every outcome and the kinds of bad input are kept in ``STATS`` for the summary
that ``tests/fuzz/conftest.py`` prints at the end of the run.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
import time
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass

from ringlab import cli

OUTCOMES = ("clear", "unclear", "accepted", "in range", "traceback", "hang")
STATS = {"outcomes": Counter(), "kinds": set(), "calls": 0, "json_documents": 0}


class Hang(BaseException):
    """Raised by SIGALRM inside a call that ran past its limit (BaseException: no ``except Exception`` eats it)."""


@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    error: BaseException | None
    hung: bool
    seconds: float

    def describe(self) -> str:
        return (f"exit {self.code}, {self.seconds:.2f} s, error {self.error!r}\n--- stderr ---\n{self.err[-2000:]}"
                f"\n--- stdout ---\n{self.out[-1000:]}")


MEMORY_HEADROOM = 4 * 2**30  # bytes of address space a call may add: a memory bomb fails alone, not the test run


def _limit_memory():
    """Cap this process's address space at its current size plus MEMORY_HEADROOM; return a restore function."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        return lambda: None
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = current + MEMORY_HEADROOM
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_cli(argv: list[str], timeout: float = 10.0, stdin: str = "") -> Outcome:
    """``ringlab.cli.main(argv)`` with stdout/stderr captured, stdin given, at most ``timeout`` seconds and
    ``MEMORY_HEADROOM`` more bytes of address space (Linux)."""
    out, err = io.StringIO(), io.StringIO()

    def alarm(signum, frame):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
    code, error, hung = None, None, False
    started = time.monotonic()
    restore_memory = _limit_memory()
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Hang:
        hung = True
    except BaseException as exc:  # noqa: BLE001 - exactly what the fuzz is looking for
        error = exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        restore_memory()
        signal.signal(signal.SIGALRM, previous)
        sys.stdin = old_stdin
    STATS["calls"] += 1
    return Outcome(code, out.getvalue(), err.getvalue(), error, hung, time.monotonic() - started)


def names_option(message: str, option: str) -> bool:
    """Does ``message`` name ``option`` (``--world-size``), its dest (``world_size``) or its words (``world size``)?"""
    text = message.lower()
    bare = option.lstrip("-").lower()
    return any(form in text for form in (option.lower(), bare, bare.replace("-", "_"), bare.replace("-", " ")))


def judge(outcome: Outcome, option: str) -> str:
    """One of :data:`OUTCOMES` for an invocation that was given a bad value for ``option``."""
    if outcome.hung:
        return "hang"
    if outcome.error is not None or "Traceback (most recent call last)" in outcome.err \
            or "internal error" in outcome.err:
        return "traceback"
    if outcome.code == 0:
        return "accepted"
    lines = [line for line in outcome.err.splitlines() if line.strip()]
    if outcome.code in (1, 2, 3) and len(lines) == 1 and names_option(lines[0], option):
        return "clear"
    return "unclear"


def record(kind: str, verdict: str) -> None:
    STATS["kinds"].add(kind)
    STATS["outcomes"][verdict] += 1


# --- every parser of the command line, found by running each command up to its parse_args -------------------

class _Captured(BaseException):
    def __init__(self, parser):
        super().__init__()
        self.parser = parser


def command_parsers() -> dict[tuple[str, ...], "argparse.ArgumentParser"]:
    """``{("cost",): parser, ("calc", "kv"): parser, ...}`` for every command of :data:`ringlab.cli.COMMANDS`
    and every calculator a command registers in a ``SUBCOMMANDS`` table, each parser built by the command
    itself (its ``main`` runs until ``parse_args``), so a new command or option is walked by construction."""
    import argparse
    import importlib

    def capture(call) -> argparse.ArgumentParser:
        original = argparse.ArgumentParser.parse_args

        def stop(self, *args, **kwargs):
            raise _Captured(self)

        argparse.ArgumentParser.parse_args = stop
        try:
            call()
        except _Captured as got:
            return got.parser
        finally:
            argparse.ArgumentParser.parse_args = original
        raise AssertionError(f"{call} printed or returned without building a parser")

    found = {}
    for name, (module_name, _) in cli.COMMANDS.items():
        module = importlib.import_module(module_name)
        subcommands = getattr(module, "SUBCOMMANDS", None)
        if subcommands:
            for sub, (sub_module, function, _) in subcommands.items():
                main = getattr(importlib.import_module(sub_module), function)
                found[(name, sub)] = capture(lambda main=main: main([]))
        else:
            found[(name,)] = capture(lambda module=module: module.main([]))
    return found


NUMBER_TYPES = {"size", "count", "bandwidth", "duration", "number", "integer"}  # cli_args factories' names


def numeric_options(parser) -> list:
    """The options of ``parser`` read by a number type of :mod:`ringlab.cli_args`."""
    return [a for a in parser._actions
            if a.option_strings and getattr(a.type, "__name__", None) in NUMBER_TYPES]


def exclusive_partners(parser, action) -> set[str]:
    """Option strings that argparse refuses together with ``action`` (its mutually exclusive groups)."""
    out = set()
    for group in parser._mutually_exclusive_groups:
        if action in group._group_actions:
            out |= {s for a in group._group_actions if a is not action for s in a.option_strings}
    return out


def without(argv: list[str], options: set[str]) -> list[str]:
    """``argv`` less each of ``options`` and its value (``--opt value`` or ``--opt=value``)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
            continue
        if word in options:
            skip = True
            continue
        if word.split("=", 1)[0] in options and "=" in word:
            continue
        out.append(word)
    return out


_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
NCCL_TABLE = os.path.join(_FIXTURES, "nccl", "a100_sxm4_8gpu_nccl_tests_2_19.txt")
SHARDS_TINY = os.path.join(_FIXTURES, "shards", "tiny")  # `ringlab shards write --shards 2 --shard-size 2KiB`
GPUMON_OUT = "@TMP@/gpumon.csv"  # replaced by a test's temporary folder

# Representative valid command lines of every command found by command_parsers(): the first of each is the
# base the numeric fuzz varies one option of. A command without an entry fails tests/test_cli_layout.py.
REPRESENTATIVE: dict[tuple[str, ...], list[list[str]]] = {
    ("check",): [["01a"]],
    ("practice",): [["--reveal", "05"], []],
    ("bench",): [["--world-size", "2", "--max-bytes", "64", "--iters", "1", "--warmup", "0", "--timeout", "120"]],
    ("calc", "kv"): [["--model", "llama-2-70b", "--tokens", "4096", "--batch", "32"],
                     ["--model", "gemma-2-9b", "--tokens", "32768", "--block-size", "16"]],
    ("calc", "comm"): [["--strategy", "fsdp_full_shard", "--params", "7e9", "--world-size", "64", "--bandwidth",
                        "450GB/s"], ["--strategy", "hybrid_shard", "--params", "7e9", "--topology", "dgx-h100",
                                     "--nodes", "4"]],
    ("calc", "roofline"): [["--flops", "512e9", "--bytes", "8e9", "--hardware", "a100-sxm-80gb"]],
    ("calc", "decode"): [["--model", "llama-2-7b", "--hardware", "a100-sxm-80gb", "--context", "4096", "--batch", "8",
                          "--sla-ms", "50"]],
    ("calc", "bubble"): [["--stages", "4", "--microbatches", "8", "--grid"],
                         ["--stages", "12", "--microbatches", "48", "--schedule", "interleaved-1f1b",
                          "--virtual-stages", "2", "--grid"]],
    ("calc", "train"): [["--model", "llama-3.1-405b", "--seq-len", "8192", "--global-batch", "2048", "--dp", "128",
                         "--tp", "8", "--pp", "16", "--topology", "dgx-h100"],
                        ["--model", "mixtral-8x7b", "--seq-len", "4096", "--global-batch", "64", "--dp", "8",
                         "--tp", "2", "--ep", "8"]],
    ("cost",): [["--world-size", "64", "--size", "1GiB"], ["--topology", "dgx-h100", "--nodes", "2", "--size", "1GiB"],
                ["--collective", "all_to_all", "--world-size", "8", "--size", "8MiB"]],
    ("explain",): [[NCCL_TABLE]],
    ("gpumon",): [["--out", GPUMON_OUT, "--backend", "smi", "--count", "1", "--interval", "0.1",
                   "--smi-timeout", "1"]],
    ("serve-sim",): [["--seconds", "2", "--rate", "2"]],
    ("plan", "train"): [["--model", "llama-3-8b", "--gpus", "8", "--seq-len", "2048", "--global-batch", "16", "--top",
                         "3"]],
    ("plan", "serve"): [["--model", "llama-3-8b", "--rate", "1", "--seconds", "2", "--sla-ttft", "500ms",
                         "--sla-tpot", "50ms"]],
    ("shards", "write"): [["--dir", "@TMP@/ckpt", "--shards", "2", "--shard-size", "4KiB", "--seed", "1"]],
    ("shards", "serve"): [["--dir", SHARDS_TINY, "--duration", "0.2", "--faults", "1#1=status:503:1",
                           "--records", "@TMP@/records.json"]],
    # nothing listens on port 9 (discard): the index request is refused, a retry, exit 1 with the --json report
    ("shards", "fetch"): [["http://127.0.0.1:9/model.safetensors.index.json", "--dest", "@TMP@/dl", "--concurrency",
                           "2", "--timeout", "5", "--retries", "1", "--json"]],
    ("topic",): [[], ["05"]],
    ("verify",): [["--input", "random", "--world-sizes", "1-4", "--numel", "100"],
                  ["--topology", "dgx-h100", "--numel", "8", "--nodes", "1,2"]],
}
