"""Issue 31's classes of resource and honesty faults, one generator per class, run on every command by
walking the parsers (cli_harness.command_parsers) or on the public API:

* **largest accepted values** (refuse before allocating): every numeric option at the largest value its type
  accepts (found by asking the type function, not listed here) -> the command ends in the time limit under
  the harness's memory cap, exit 0, 1, 2 or 3 and, if not 0, one line on stderr; never a traceback, a
  MemoryError or a hang;
* **non-regular files**: every option that reads a file (a path type, or a positional FILE) given a FIFO with
  no writer and a character device -> refused at once, never blocked;
* **malformed rows**: a random row and value column of a real nccl-tests table replaced by a hostile number
  (overflowing exponents, NaN, infinities, negatives, words) -> the report names that line as malformed, and
  no infinite or NaN number is printed;
* **hostile cluster numbers**: every numeric parameter of ``custom_cluster`` given non-finite, non-positive,
  boolean or too-large values -> ValueError/TypeError naming the parameter;
* **mutations that fail**: random BlockManager walks with unhashable tokens slipped in -> the books are
  unchanged by each refused call and the invariants hold;
* **partial runs**: random traces and step caps -> ``truncated`` is set exactly when the cap cut the run.

Counts of every generator are printed at the end of the run (conftest.py).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_harness import (NCCL_TABLE, REPRESENTATIVE, STATS, command_parsers, exclusive_partners, numeric_options,
                         record, run_cli, without)

GUARDS: Counter = STATS.setdefault("guards", Counter())  # printed by conftest.py
PARSERS = command_parsers()
# commands that start processes, need a GPU or a terminal, or serve until told to stop (shards serve runs for its
# --duration by design): their numbers are covered by test_numeric_extremes
NOT_RUN = {("bench",), ("gpumon",), ("check",), ("practice",), ("shards", "serve")}
CANDIDATES = ["1e18", "1e15", "1e12", "1e10", "1e9", "1e8", "1e7", "1e6", "1e5", "1e4", "1000", "100", "10", "1"]
CALL_LIMIT = 60.0  # seconds: generous for a slow machine; an unguarded case takes minutes or never ends


def largest_accepted(action) -> str | None:
    """The largest of CANDIDATES the option's type accepts, asked of the type function itself."""
    for text in CANDIDATES:
        try:
            action.type(text)
        except Exception:  # noqa: BLE001 - argparse's contract: any error means refused
            continue
        return text
    return None


LARGEST = [(path, action.option_strings[-1]) for path, parser in sorted(PARSERS.items()) if path not in NOT_RUN
           for action in numeric_options(parser)]


@pytest.mark.slow  # some commands really run at their largest accepted value
@pytest.mark.parametrize("path, option", LARGEST, ids=[" ".join(p) + " " + o for p, o in LARGEST])
def test_largest_accepted_values_are_refused_or_run(path, option, tmp_path):
    parser = PARSERS[path]
    action = next(a for a in parser._actions if option in a.option_strings)
    value = largest_accepted(action)
    if value is None:
        pytest.skip("no candidate is accepted")
    failures = []
    for base in REPRESENTATIVE[path]:
        base = [a.replace("@TMP@", str(tmp_path)) for a in base]
        argv = [*path, *without(base, set(action.option_strings) | exclusive_partners(parser, action)),
                f"{option}={value}"]
        outcome = run_cli(argv, timeout=CALL_LIMIT)
        GUARDS["largest accepted value: calls"] += 1
        crashed = outcome.hung or outcome.error is not None or "Traceback" in outcome.err \
            or "internal error" in outcome.err
        lines = [line for line in outcome.err.splitlines() if line.strip()]
        ok = not crashed and (outcome.code == 0 or outcome.code in (1, 2, 3) and len(lines) <= 1)
        record("largest accepted value", "clear" if ok and outcome.code else "in range" if ok else
               "hang" if outcome.hung else "traceback" if crashed else "unclear")
        if not ok:
            failures.append(f"{' '.join(argv)}: {outcome.describe()}")
    assert not failures, "\n\n".join(failures[:3])


def _file_options():
    """(path, option or '' for a positional FILE) of every option that reads an input file."""
    out = []
    for path, parser in sorted(PARSERS.items()):
        if path in NOT_RUN:
            continue
        for action in parser._actions:
            reads = getattr(action.type, "__name__", "") == "name_or_path" or \
                (not action.option_strings and action.metavar == "FILE")
            if reads:
                out.append((path, action.option_strings[-1] if action.option_strings else ""))
    return out


FILE_OPTIONS = _file_options()


@pytest.mark.parametrize("path, option", FILE_OPTIONS, ids=[" ".join(p) + " " + (o or "FILE") for p, o in FILE_OPTIONS])
def test_non_regular_files_are_refused_at_once(path, option, tmp_path):
    fifo = tmp_path / "no-writer.fifo"
    os.mkfifo(fifo)
    parser = PARSERS[path]
    base = [a.replace("@TMP@", str(tmp_path)) for a in REPRESENTATIVE[path][0]]
    failures = []
    for kind, target in (("FIFO without a writer", str(fifo)), ("character device", "/dev/zero")):
        if option:
            action = next(a for a in parser._actions if option in a.option_strings)
            argv = [*path, *without(base, set(action.option_strings)), f"{option}={target}"]
        else:
            argv = [*path, *[a for a in base if a != NCCL_TABLE], target]
        outcome = run_cli(argv, timeout=CALL_LIMIT)
        GUARDS["non-regular file: calls"] += 1
        lines = [line for line in outcome.err.splitlines() if line.strip()]
        ok = not outcome.hung and outcome.error is None and outcome.code == 2 and len(lines) == 1
        record(f"non-regular file: {kind}", "clear" if ok else "hang" if outcome.hung else "unclear")
        if not ok:
            failures.append(f"{kind}: {outcome.describe()}")
    assert not failures, "\n\n".join(failures)


# --- malformed rows ---------------------------------------------------------------------------------------

_TABLE = Path(NCCL_TABLE).read_text().splitlines()
_ROWS = [i for i, line in enumerate(_TABLE) if line.strip()[:1].isdigit()]
_VALUE_COLUMNS = (5, 6, 7, 9, 10, 11)
hostile_numbers = st.one_of(
    st.integers(309, 99999).map(lambda e: f"1e{e}"), st.integers(309, 99999).map(lambda e: f"-2.5e{e}"),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "-0.5", "x", "1.2.3", "--"]),
    st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False).map(repr))


@settings(max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(row=st.sampled_from(_ROWS), column=st.sampled_from(_VALUE_COLUMNS), token=hostile_numbers)
def test_hostile_numbers_in_a_table_are_named_malformed(row, column, token):
    import tempfile

    lines = list(_TABLE)
    cells = lines[row].split()
    cells[column] = token
    lines[row] = "  ".join(cells)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.txt")
        Path(path).write_text("\n".join(lines) + "\n")
        outcome = run_cli(["explain", path, "--json"], timeout=CALL_LIMIT)
    GUARDS["malformed row: calls"] += 1
    STATS["json_documents"] += 1
    assert outcome.code == 0 and outcome.error is None, outcome.describe()
    data = json.loads(outcome.out)
    named = [m["line"] for m in data["malformed_rows"]]
    assert named == [f"{path}:{row + 1}"], (token, named)
    assert not re.search(r"\b(inf|nan)\b", outcome.out, re.I) or "nan" in token.lower() or "inf" in token.lower()
    assert data["peak_busbw"] is None or math.isfinite(data["peak_busbw"])
    record("malformed row value", "clear")


# --- the API ----------------------------------------------------------------------------------------------

_CLUSTER_NUMBERS = ("nodes", "gpus_per_node", "gpu_bandwidth", "nics_per_node", "nic_gbps", "gpu_latency",
                    "nic_latency", "pcie_bandwidth")
hostile = st.sampled_from([math.inf, -math.inf, math.nan, 0, -1, -1e-300, 10**400, True, "8", None])


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(field=st.sampled_from(_CLUSTER_NUMBERS), value=hostile)
def test_custom_cluster_names_every_hostile_number(field, value):
    from ringlab.topology import custom_cluster

    args = dict(nodes=2, gpus_per_node=4, gpu_bandwidth=1e9, nics_per_node=4, nic_gbps=100.0)
    if field in ("gpu_latency", "nic_latency") and value == 0:
        value = -1  # zero latency is allowed (an ideal link)
    if field == "nics_per_node" and value == 0:
        value = -1  # no NICs is fine for one node; two nodes would say so, naming nics_per_node anyway
    args[field] = value
    GUARDS["custom_cluster hostile numbers"] += 1
    with pytest.raises((ValueError, TypeError), match=field):
        custom_cluster(**args)


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "append", "bad", "fork", "free"]), st.integers(0, 5),
                          st.integers(1, 40)), min_size=1, max_size=60))
def test_refused_block_manager_calls_leave_the_books(walk):
    from ringlab.serving.blocks import BlockManager, OutOfBlocksError

    blocks = BlockManager(24, 4)
    live = set()
    for op, seq, n in walk:
        GUARDS["block manager calls"] += 1
        try:
            if op == "alloc" and seq not in live:
                blocks.allocate(seq, list(range(n)))
                live.add(seq)
            elif op == "append" and seq in live:
                blocks.append_token(seq, n)
            elif op == "bad" and seq in live:
                before = (blocks.fingerprint(), blocks.block_table(seq), blocks.tokens(seq))
                with pytest.raises(TypeError):
                    blocks.append_token(seq, [n])
                assert (blocks.fingerprint(), blocks.block_table(seq), blocks.tokens(seq)) == before
                GUARDS["block manager refused mutations"] += 1
            elif op == "fork" and seq in live and (seq + 6) not in live:
                blocks.fork(seq, seq + 6)
                live.add(seq + 6)
            elif op == "free" and seq in live:
                blocks.free(seq)
                live.discard(seq)
        except OutOfBlocksError:
            pass
        blocks.check_invariants()


@settings(max_examples=25, derandomize=True, database=None, deadline=None)
@given(seed=st.integers(0, 1000), rate=st.floats(1, 40), cap=st.integers(1, 400))
def test_truncated_exactly_when_the_cap_cuts_the_run(seed, rate, cap):
    from ringlab.serving import SchedulerConfig, poisson_requests
    from ringlab.serving.scheduler import Scheduler

    requests = poisson_requests(rate=rate, seconds=2, prompt_len=32, output_len=16, seed=seed)
    trace = Scheduler("llama-2-7b", "h100-sxm", 500, config=SchedulerConfig(max_steps=cap)).run(requests)
    m = trace.metrics()
    GUARDS["serving runs with a step cap"] += 1
    done = m["finished"] + m["rejected"] == m["requests"] == len(requests)
    assert m["truncated"] == (not done and not m["livelock"]), m
    assert m["truncated"] == (m["steps"] == cap and not done)
