"""The number grammar of every CLI option and the same rules for Python arguments (ringlab.calc.parsing)."""

from __future__ import annotations

import argparse
import math
import signal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab import cli_args
from ringlab.calc.parsing import SIZE_MAX, echo_quantity, parse_bandwidth, parse_count, parse_duration, parse_int, parse_real, parse_size
from ringlab.validation import check_bool, check_int, check_real


@pytest.mark.parametrize("text, expected", [
    ("64MiB", 64 * 2**20), ("1GB", 10**9), ("1 GB", 10**9), ("1.5 GiB", 3 * 2**29), ("7e9", 7 * 10**9),
    ("1,000,000", 10**6), ("1_000_000", 10**6), ("2k", 2000), ("2K", 2000), ("64M", 64 * 10**6),
    ("70B", 70), ("16Mb", 2 * 10**6), ("8b", 1), ("1Gbit", 125 * 10**6), ("1KiB", 1024), ("1Kib", 128),
    (".5kB", 500), ("+4", 4), ("1e+3", 1000), (12, 12), (7e9, 7 * 10**9), (np.int64(5), 5),
])
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text, fragment", [
    ("2,5GB", "only group thousands"), ("1,00", "only group thousands"), ("1_0", "only group thousands"),
    ("1,000_000", "only group thousands"), ("16mb", "did you mean MB or Mb"), ("1gib", "did you mean GiB"),
    ("1e31", "<= 1,152,921,504,606,846,976"), ("-5", ">= 1"), ("0", ">= 1"), ("0.5", ">= 1"),
    ("1.5e0B", "whole number"), ("9b", "whole number"), ("nan", "finite"), ("inf", "finite"), ("-Infinity", "finite"),
    ("1e88888888", "exponent out of range"), ("", "empty"), ("   ", "empty"), ("abc", "not a number"),
    ("\uff11\uff12", "not a number"), ("\u0663", "not a number"), ("1.2.3", "not a number"),
    ("12 parsecs", "unknown unit"), ("9" * 101, "at most 100"),
])
def test_bad_sizes_name_the_argument_and_the_rule(text, fragment):
    with pytest.raises(ValueError, match="message_size") as caught:
        parse_size(text, "message_size")
    assert fragment in str(caught.value)


@pytest.mark.parametrize("value", [True, None, [1], "1".encode()])
def test_non_numbers_are_type_errors(value):
    with pytest.raises(TypeError, match="size"):
        parse_size(value)


def test_float_inputs_must_be_finite_and_whole():
    for bad in (float("nan"), float("inf"), 2.5):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_a_huge_exponent_is_refused_before_any_exact_arithmetic():
    def alarm(*_):
        raise TimeoutError("the parser built the number")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(5)
    try:
        for text in ("1e88888888", "1e-88888888", "1e+9999", "9.9e401GB"):
            for parse in (parse_size, parse_count, parse_bandwidth, parse_duration, parse_real, parse_int):
                with pytest.raises(ValueError, match="exponent|characters"):
                    parse(text)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@given(st.integers(1, SIZE_MAX // 2**10), st.sampled_from([",", "_", ""]))
def test_grouped_integers_read_back_exactly(n, sep):
    text = f"{n:,}".replace(",", sep)
    assert parse_size(text) == n and parse_count(text) == n and parse_int(text) == n
    assert parse_size(text + " KiB") == n * 1024


@given(st.integers(0, 999), st.integers(1, 99).map(lambda d: str(d).zfill(2)[-2:] if d < 10 else str(d)))
def test_a_decimal_comma_is_always_refused(whole, frac):
    for parse in (parse_size, parse_count, parse_real, parse_int):
        with pytest.raises(ValueError, match="only group thousands"):
            parse(f"{whole},{frac}")


@given(st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False),
       st.sampled_from([("kB", 10**3), ("MB", 10**6), ("GB", 10**9), ("KiB", 2**10), ("MiB", 2**20),
                        ("Mb", Fraction(10**6, 8)), ("Gb", Fraction(10**9, 8))]))
def test_sizes_are_exact(number, unit):
    suffix, scale = unit
    exact = Fraction(number) * scale
    if exact.denominator != 1 or not 1 <= exact <= SIZE_MAX:
        with pytest.raises(ValueError):
            parse_size(f"{number}{suffix}")
    else:
        assert parse_size(f"{number}{suffix}") == exact


def test_counts():
    assert parse_count("7B") == parse_count("7b") == parse_count("7G") == 7 * 10**9
    assert parse_count("3.5B") == 35 * 10**8 and parse_count("70M") == 7 * 10**7 and parse_count("1.5T") == 15 * 10**11
    for bad, fragment in (("3,5B", "thousands"), ("7GiB", "unknown unit"), ("7m", "did you mean M"),
                          ("7.5", "whole"), ("0", ">= 1"), ("1e19", "<= 1,000,000,000,000,000,000")):
        with pytest.raises(ValueError, match=fragment):
            parse_count(bad, "n_params")


def test_bandwidth_bits_and_bytes_are_told_apart_and_shown_back():
    assert parse_bandwidth("400 Gb/s") == 50e9 == parse_bandwidth("400Gbps") == parse_bandwidth("50 GB/s")
    assert parse_bandwidth("200Gb") == 25e9 and parse_bandwidth("200GB") == 200e9 and parse_bandwidth("2e11") == 2e11
    assert echo_quantity("400 Gb/s", parse_bandwidth("400 Gb/s")) == "400 Gb/s = 50 GB/s"
    assert echo_quantity("16Mb", parse_size("16Mb"), kind="size") == "16Mb = 2,000,000 B"
    for bad, fragment in (("200gb", "did you mean GB or Gb"), ("0", ">= 1000"), ("1e-300", ">= 1000"), ("999 B/s", ">= 1000"), ("inf", "finite"), ("1e16", r"<= 1e\+15"),
                          ("5GB/min", "unknown unit")):
        with pytest.raises(ValueError, match=fragment):
            parse_bandwidth(bad, "--bandwidth")
    assert parse_bandwidth("1 kB/s") == 1e3 and parse_bandwidth("8 kb/s") == 1e3  # the least accepted, either unit


def test_durations():
    assert parse_duration("250ms") == 0.25 and parse_duration("2min") == 120 and parse_duration("1h") == 3600
    assert parse_duration("1.5", unit="us") == pytest.approx(1.5e-6) and parse_duration("3\u00b5s") == pytest.approx(3e-6)
    assert parse_duration("0", min_open=False) == 0.0
    for bad, fragment in (("0", "> 0"), ("-1", "> 0"), ("1e11", "<= 31,622,400"), ("5 parsecs", "unknown unit"),
                          ("nan", "finite")):
        with pytest.raises(ValueError, match=fragment):
            parse_duration(bad, "--interval", max=366 * 86400)


def test_plain_numbers():
    assert parse_real("1e-6") == 1e-6 and parse_real("-2.5", min=-3) == -2.5 and parse_int("1,024") == 1024
    assert parse_int("1e3") == 1000
    with pytest.raises(ValueError, match="whole"):
        parse_int("2.5", "--world-size")
    with pytest.raises(ValueError, match="no unit"):
        parse_real("5 kg", "--gamma")
    with pytest.raises(ValueError, match=">= 0"):
        parse_real("-1", "--gamma", min=0)


def test_python_argument_checks():
    assert check_int(4.0, "world_size") == 4 and check_int(np.int32(4), "world_size", min=1) == 4
    for bad in (2.5, True, "4", None, float("nan")):
        with pytest.raises(TypeError, match="world_size must be an integer"):
            check_int(bad, "world_size")
    with pytest.raises(ValueError, match="world_size.*>= 1"):
        check_int(0, "world_size", min=1)
    assert check_real(np.float32(0.5), "gamma") == 0.5
    for bad, exc in ((float("nan"), ValueError), (math.inf, ValueError), ("0.5", TypeError), (False, TypeError)):
        with pytest.raises(exc, match="gamma"):
            check_real(bad, "gamma")
    assert check_bool(np.bool_(False), "no_sync") is False
    for bad in ("no", 0, 1, None, "False"):
        with pytest.raises(TypeError, match="no_sync must be True or False"):
            check_bool(bad, "no_sync")


def test_argparse_types_and_one_line_errors(capsys, tmp_path):
    p = cli_args.ArgumentParser(prog="demo")
    p.add_argument("--size", type=cli_args.size())
    p.add_argument("--name", type=cli_args.text())
    p.add_argument("--out", type=cli_args.output_file)
    assert p.parse_args(["--size", "1,000 KiB", "--name", "x", "--out", str(tmp_path / "o.csv")]).size == 1024000
    for argv, fragment in ((["--size", "2,5GB"], "argument --size: '2,5GB'"), (["--name", ""], "argument --name: is empty"),
                           (["--out", "/no/such/dir/o.csv"], "does not exist"),
                           (["--out", str(tmp_path / ("n" * 300))], "at most 255")):
        with pytest.raises(SystemExit) as stop:
            p.parse_args(argv)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and fragment in err and err.startswith("demo: error: ")


def test_dispatch_runs_the_chosen_subcommand_and_refuses_others_in_one_line(capsys):
    table = {"count": ("builtins", "len", "count the arguments"), "echo": ("builtins", "print", "print them")}
    assert cli_args.dispatch("demo", table, ["count", "a", "b"], usage="U") == 2  # the function's return value
    assert cli_args.dispatch("demo", table, ["echo", "x"], usage="U") == 0  # None counts as 0
    assert capsys.readouterr().out == "['x']\n"
    assert [cli_args.dispatch("demo", table, argv, usage="U") for argv in ([], ["-h"], ["--help"])] == [0, 0, 0]
    assert capsys.readouterr().out == "U\n" * 3
    assert cli_args.dispatch("demo", table, ["zap"], usage="U", noun="tool") == 2
    assert cli_args.dispatch("demo", {"b": table["count"], "a": table["echo"]}, ["Count"], usage="U", sort=True) == 2
    assert capsys.readouterr().err == ("demo: unknown tool 'zap'; choose one of: count, echo\n"
                                       "demo: unknown subcommand 'Count'; choose one of: a, b\n")


def test_json_text_never_writes_nan():
    assert cli_args.json_text({"a": [float("nan"), 1.0, {"b": float("-inf")}]}, indent=None) == \
        '{"a": [null, 1.0, {"b": null}]}'
    with pytest.raises(argparse.ArgumentTypeError):
        cli_args.figure_file("plot.csv")


@given(st.integers(309, 400), st.sampled_from(["", "-"]), st.sampled_from(["1", "9.99", "1.5"]))
def test_values_beyond_the_float_range_are_refused_by_name(exponent, sign, mantissa):
    """Issue 31: 1e309 crashed every numeric option (OverflowError while writing the range message)."""
    text = f"{sign}{mantissa}e{exponent}"
    for parse, kwargs in ((parse_size, {}), (parse_count, {}), (parse_bandwidth, {}), (parse_duration, {}),
                          (parse_real, {"min": 0, "max": 1}), (parse_real, {}), (parse_int, {"max": 10}),
                          (parse_int, {})):
        try:
            value = parse(text, "opt", **kwargs)
        except ValueError as exc:
            assert "opt=" in str(exc) and f"e+{exponent}" in str(exc) or "float range" in str(exc), str(exc)
        else:  # only a whole number within its limits (none below) is accepted, as an exact int
            assert parse is parse_int and value == int(Fraction(text)) and value <= kwargs.get("max", value)


@pytest.mark.parametrize("text", ["1e-400", "-1e-330", "0.0000000000000000000001e-310"])
def test_values_that_round_to_zero_are_refused(text):
    with pytest.raises(ValueError, match="nearer 0 than any float"):
        parse_real(text, "rate")
    assert parse_real("4e-320", "rate") == 4e-320  # a subnormal is a float
    assert parse_real("-0", "rate") == 0.0


def test_python_numbers_beyond_the_float_range():
    with pytest.raises(ValueError, match="x must be finite, got 1e\\+400"):
        check_real(10**400, "x")
    with pytest.raises(ValueError, match="<= 5, got -1e\\+400"):
        check_int(-10**400, "x", min=-5, max=5)


def test_cli_integers_stop_at_int64(capsys):
    p = cli_args.ArgumentParser(prog="demo")
    p.add_argument("--n", type=cli_args.integer(min=1))
    assert p.parse_args(["--n", str(2**63 - 1)]).n == 2**63 - 1
    with pytest.raises(SystemExit):
        p.parse_args(["--n", str(2**63)])
    assert "argument --n" in capsys.readouterr().err


def test_help_fits_the_width_and_lists_long_choices(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    p = cli_args.ArgumentParser(prog="demo", description="x " * 120)
    p.add_argument("--collective", choices=["all_reduce", "reduce_scatter", "all_gather", "broadcast"],
                   default="all_reduce")
    p.add_argument("--op", choices=["sum", "max"])
    text = p.format_help()
    assert max(map(len, text.splitlines())) <= 100
    assert "--collective COLLECTIVE" in text and "{sum,max}" in text
    assert "default all_reduce (one of: all_reduce, reduce_scatter, all_gather, broadcast)" in " ".join(text.split())


@pytest.mark.parametrize("limit", [0.01, 0.1, 0.3, 0.7, 1e-3, 2.5])
def test_a_value_typed_at_its_limit_is_inside_it(limit):
    # the binary value of 0.01 lies a hair above 1/100, of 0.3 a hair below 3/10: the typed decimal
    # and the Python float both equal the limit their author wrote
    for typed in (repr(limit), limit):
        assert parse_real(typed, "x", min=limit, max=limit) == limit
    with pytest.raises(ValueError, match="x"):
        parse_real(repr(limit * 0.999), "x", min=limit)
    with pytest.raises(ValueError, match="x"):
        parse_real(repr(limit * 1.001), "x", max=limit)
