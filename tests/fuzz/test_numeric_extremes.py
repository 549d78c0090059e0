"""Every numeric option of every command, found by walking the parsers, fed extreme values: huge, beyond
the float range, tiny, below the smallest float, negative, NaN, infinite, past int64. Each call must end
with exit status 0 (a value inside the option's limits, run to the end), 2 (refused in one line naming
the option) or, for a command whose run reports a finding, 1; never a traceback, an "internal error" or a
hang. The rest of the command line is the command's first representative one (cli_harness.REPRESENTATIVE).
"""

from __future__ import annotations

from collections import Counter

import pytest

from cli_harness import (REPRESENTATIVE, STATS, command_parsers, exclusive_partners, names_option, numeric_options,
                         record, run_cli, without)

# (kind of extreme, value): the classes of issue 31 section 5 and their neighbours
EXTREMES = [
    ("beyond the float range", "1e309"), ("far beyond the float range", "1e400"), ("negative beyond", "-1e309"),
    ("largest float", "1.7976931348623157e308"), ("huge", "1e300"), ("past int64", "9223372036854775808"),
    ("below -int64", "-9223372036854775809"), ("past 2**64", "18446744073709551617"), ("1e19", "1e19"),
    ("below the smallest float", "1e-400"), ("negative below the smallest float", "-1e-400"),
    ("subnormal", "4e-320"), ("tiny", "1e-300"), ("negative", "-1"), ("negative huge", "-1e300"),
    ("nan", "nan"), ("inf", "inf"), ("-inf", "-inf"), ("huge with unit", "1e300GB"), ("zero", "0"),
]
# Seconds per call: a value inside the limits runs the command for real; bench starts two processes
CALL_LIMIT = {"bench": 120}
PARSERS = command_parsers()
CASES = [(path, action.option_strings[-1]) for path, parser in sorted(PARSERS.items())
         for action in numeric_options(parser)]
COUNTS: Counter = STATS.setdefault("extreme_exit_codes", Counter())  # printed by conftest.py


@pytest.mark.parametrize("path, option", CASES, ids=[" ".join(p) + " " + o for p, o in CASES])
def test_extreme_numbers_never_crash(path, option, tmp_path):
    parser = PARSERS[path]
    action = next(a for a in parser._actions if option in a.option_strings)
    base = [a.replace("@TMP@", str(tmp_path)) for a in REPRESENTATIVE[path][0]]
    base = without(base, set(action.option_strings) | exclusive_partners(parser, action))
    failures = []
    for kind, value in EXTREMES:
        if path == ("bench",) and kind in ("zero", "tiny", "subnormal"):  # in range: a real benchmark run each
            continue
        outcome = run_cli([*path, *base, f"{option}={value}"], timeout=CALL_LIMIT.get(path[0], 30))
        COUNTS[outcome.code] += 1
        crashed = outcome.hung or outcome.error is not None or "Traceback" in outcome.err \
            or "internal error" in outcome.err
        lines = [line for line in outcome.err.splitlines() if line.strip()]
        ok = not crashed and (outcome.code in (0, 1) or outcome.code == 2 and len(lines) == 1
                              and (names_option(lines[0], option) or "--" in lines[0]))
        record(f"extreme number: {kind}", "clear" if ok and outcome.code == 2 else
               "in range" if ok else "hang" if outcome.hung else "traceback" if crashed else "unclear")
        if not ok:
            failures.append(f"{option}={value} ({kind}): {outcome.describe()}")
    assert not failures, "\n\n".join(failures[:4])


def test_every_command_with_a_number_is_walked():
    """The walk reaches the options issue 31 names, and each option's limits hold (refusals counted)."""
    walked = {(p, o) for p, o in CASES}
    assert {(("cost",), "--size"), (("cost",), "--world-size"), (("serve-sim",), "--rate"),
            (("calc", "train"), "--efficiency"), (("gpumon",), "--interval")} <= walked
    assert len(CASES) >= 60
