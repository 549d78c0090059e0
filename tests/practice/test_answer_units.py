"""The answer parser: units read exactly, slips named, anything else refused with a clear error."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.check.cards import Ask
from ringlab.practice.units import SCALES, WrongDimension, check_answer, parse_answer

TOTAL = Ask("total", "total bytes", unit="B", show="B", world_size="n")
MS = Ask("t", "time", unit="s", show="ms")
FRACTION = Ask("f", "bubble", unit="1", rel_tol=0.01)


@pytest.mark.parametrize("text", ["140 GB", "130.4 GiB", "1.4e11 B", "140e9", "140,000,000,000", "1.4e11B",
                                  "140000 MB", "1120 Gb", " 140 GB "])
def test_the_same_140_gb_written_many_ways_is_right(text):
    assert check_answer(TOTAL, 140e9, text, {"n": 8}).correct


@pytest.mark.parametrize("text, slip", [
    ("130.4 GB", "GB vs GiB"),  # 130.4 GiB typed as GB: off by 2**30 / 1e9
    ("140 GiB", "GB vs GiB"),  # 140e9 / 1e9 labelled GiB
    ("17.5 GB", "bits vs bytes"),  # 140 GB / 8
    ("1120 GB", "bits vs bytes"),
    ("2.24 TB", "per-rank vs total"),  # x 16 ranks
    ("0.14 GB", "prefix slip"),
    ("3 ms", "wrong units"),
    ("100 GB", "wrong value"),
])
def test_slips_are_named(text, slip):
    verdict = check_answer(TOTAL, 140e9, text, {"n": 16})
    assert not verdict.correct and slip in verdict.mistake and slip in verdict.message
    assert "140,000,000,000 B" in verdict.message  # the right answer is shown


def test_two_slips_with_one_factor_are_both_named():
    verdict = check_answer(TOTAL, 140e9, "1.12 TB", {"n": 8})  # 8 ranks and 8 bits per byte
    assert "bits vs bytes" in verdict.mistake and "per-rank vs total" in verdict.mistake


def test_byte_slips_are_never_named_for_a_plain_number():
    # 15/96 against 1/7: a ratio of 1.094, near 1 TiB / 1 TB = 1.0995, but a fraction has no unit to confuse
    verdict = check_answer(FRACTION, 1 / 7, "15/96")
    assert not verdict.correct and verdict.mistake == "wrong value"
    assert "percentage" in check_answer(FRACTION, 1 / 7, str(100 / 7)).mistake
    assert "GB vs GiB" not in check_answer(MS, 2.0, str(2.0 * 2**30 / 1e9)).message


def test_per_rank_slip_needs_the_world_size():
    assert "per-rank" not in check_answer(TOTAL, 140e9, "1.12 TB", {"n": 1}).message
    per_seq = Ask("total", "KV", unit="B", world_size="seqs", per="sequence")
    assert "per-sequence vs total" in check_answer(per_seq, 64e9, "2 GB", {"seqs": 32}).mistake


def test_times_bare_numbers_are_in_the_asked_unit():
    for text in ("3.92", "3.92 ms", "0.00392 s", "3920 us", "3,920,000 ns"):
        assert check_answer(MS, 3.92, text).correct, text
    assert "prefix slip" in check_answer(MS, 3.92, "3.92 s").mistake


def test_fractions_percent_and_another_quantity():
    for text in ("7/16", "0.4375", "43.75 %", "43.75%", " 7 / 16 "):
        assert check_answer(FRACTION, 0.4375, text).correct, text
    other = check_answer(FRACTION, 0.4375, "7/23", others={"share of the wall clock": 7 / 23})
    assert not other.correct and "share of the wall clock" in other.mistake


@pytest.mark.parametrize("text", ["", "abc", "nan", "inf", "2,5 GB", "1/0", "1e99999 B", "GB", "12 GBB", "x" * 200])
def test_unreadable_answers_raise_value_error(text):
    with pytest.raises(ValueError):
        parse_answer(text, "1" if "/" in text else "B")


def test_case_matters_and_the_hint_says_so():
    with pytest.raises(ValueError, match="case-sensitive.*GB"):
        parse_answer("140 gb", "B")
    assert parse_answer("8 Gb", "B").value == 1e9  # gigabits are bits
    with pytest.raises(WrongDimension):
        parse_answer("5 ms", "B")
    with pytest.raises(TypeError):
        parse_answer(5, "B")


units_st = st.sampled_from(sorted(u for u in SCALES["B"] if u))


@settings(max_examples=300, deadline=None)
@given(mantissa=st.integers(min_value=1, max_value=10**6), exp=st.integers(min_value=-3, max_value=6), unit=units_st,
       space=st.sampled_from(["", " ", "  "]))
def test_parse_is_exact_for_every_size_unit(mantissa, exp, unit, space):
    value = mantissa * 10.0**exp
    text = f"{mantissa}e{exp}{space}{unit}"
    assert parse_answer(text, "B").value == pytest.approx(value * float(SCALES["B"][unit]), rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_text_is_read_or_refused_with_value_error(text):
    for dim in SCALES:
        try:
            reading = parse_answer(text, dim)
        except ValueError:
            continue
        assert math.isfinite(reading.value)


@settings(max_examples=200, deadline=None)
@given(expected=st.floats(min_value=1e3, max_value=1e15), world=st.integers(min_value=2, max_value=4096),
       factor=st.sampled_from([2**30 / 1e9, 1e9 / 2**30, 8.0, 1 / 8]))
def test_a_slip_is_never_called_right(expected, world, factor):
    verdict = check_answer(TOTAL, expected, f"{expected * factor!r} B", {"n": world})
    assert not verdict.correct and verdict.mistake != "wrong value"


@settings(max_examples=200, deadline=None)
@given(expected=st.floats(min_value=1e3, max_value=1e15), err=st.floats(min_value=-0.019, max_value=0.019))
def test_within_tolerance_is_right(expected, err):
    assert check_answer(TOTAL, expected, f"{expected * (1 + err)!r}", {"n": 8}).correct
