"""The answer parser: units read exactly, right answers accepted at the precision typed, slips named only
where they fit, anything else refused with a clear error."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ringlab.check.cards import Ask
from ringlab.practice.units import SCALES, AskAgain, WrongDimension, check_answer, parse_answer

TOTAL = Ask("total", "total bytes", unit="B", show="B", world_size="n")
MS = Ask("t", "time", unit="s", show="ms")
FRACTION = Ask("f", "bubble", unit="1", rel_tol=0.01)


@pytest.mark.parametrize("text", ["140 GB", "130.4 GiB", "1.4e11 B", "140e9", "140,000,000,000", "1.4e11B",
                                  "140000 MB", "1120 Gb", " 140 GB ", "~140 GB", "about 140GB", "\u2248 140 GB",
                                  "roughly 1.4e11 B", "approx. 140 GB"])
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


def _pair(value: float) -> tuple[float, str]:
    """The decimal/binary prefix pair of ``value``'s magnitude (1.024 for kB, 1.049 for MB ...), worked out here."""
    k = min(max(int(math.floor(math.log10(value) / 3)), 1), 5)
    return 1.024**k, ["kB", "MB", "GB", "TB", "PB"][k - 1]


@settings(max_examples=300, deadline=None)
@given(expected=st.floats(min_value=1e3, max_value=1e17), world=st.integers(min_value=2, max_value=4096),
       which=st.sampled_from(["prefix", "1/prefix", "bits", "1/bits"]))
def test_a_slip_is_never_called_right(expected, world, which):
    factor, name = _pair(expected) if "prefix" in which else (8.0, "bits vs bytes")
    factor = 1 / factor if which.startswith("1/") else factor
    verdict = check_answer(TOTAL, expected, f"{expected * factor!r} B", {"n": world})
    assert not verdict.correct and name in verdict.mistake


@settings(max_examples=300, deadline=None)
@given(expected=st.floats(min_value=1e3, max_value=1e17), off=st.floats(min_value=0.021, max_value=0.10),
       up=st.booleans(), digits=st.integers(min_value=3, max_value=6))
def test_a_few_percent_off_is_a_prefix_slip_only_where_it_matches_and_fits(expected, off, up, digits):
    """2-10 % off is named a prefix slip only when it is the prefix factor of this magnitude at the precision typed."""
    ratio = 1 + off if up else 1 / (1 + off)
    text = f"{expected * ratio:.{digits - 1}e}"  # typed to `digits` significant figures
    typed = float(text)
    assume(abs(typed / expected - 1) > 0.0201)  # rounding can bring it inside TOTAL's 2 % tolerance
    verdict = check_answer(TOTAL, expected, text, {"n": 64})
    assert not verdict.correct
    factor, name = _pair(expected)
    slip = expected * (factor if up else 1 / factor)
    half = 0.5 * 10 ** (math.floor(math.log10(typed)) - digits + 1)  # the precision typed, in bytes
    if "iB confusion" in (verdict.mistake or ""):
        assert name in verdict.mistake and abs(typed - slip) <= half * 1.000001, verdict
    elif abs(typed - slip) < min(half, abs(slip - expected) / 2) * 0.999999:
        raise AssertionError(f"{typed} is {name} vs binary at the precision typed: {verdict}")


def test_the_cases_the_issue_measured_are_not_prefix_slips():
    busbw = Ask("b", "busbw", unit="B/s", show="GB/s", rel_tol=0.01)
    # a factor of 2 where 2(n-1)/n = 1.96875 (n = 64): 1.6 % off, named kB vs KiB before
    verdict = check_answer(busbw, 185.2, f"{185.2 * 2 / 1.96875:.2f} GB/s")
    assert "KiB" not in verdict.message and "MiB" not in verdict.message and verdict.mistake == "wrong value"
    total = Ask("t", "memory", unit="B", show="GB")
    verdict = check_answer(total, 18.37, "17.63")  # 4 % low at GB scale: was "kB vs KiB or MB vs MiB"
    assert verdict.mistake == "wrong value" and "off by -4" in verdict.message
    assert "GB vs GiB" in check_answer(total, 18.37, f"{18.37 * 1e9 / 2**30:.3f}").mistake


@pytest.mark.parametrize("expected, text, note", [
    (8_388_608, "8.4 MB", "exactly 8 MiB"),  # 8 MiB; 8.4 MB is 8,400,000, equal at the precision typed
    (42_949_672_960, "43 GB", "exactly 40 GiB"),
    (42_949_672_960, "42.9 GB", "exactly 40 GiB"),
    (140.4e9, "140 GB", ""),  # 0.3 % off, outside a 0.1 % tolerance but equal at three figures
])
def test_right_at_the_precision_typed(expected, text, note):
    exact = Ask("b", "bytes", unit="B", show="B", rel_tol=0.001)
    verdict = check_answer(exact, expected, text)
    assert verdict.correct and "figures you typed" in verdict.message and note in verdict.message


def test_a_value_typed_to_one_figure_is_sent_back_unless_it_is_a_slip():
    exact = Ask("b", "bytes", unit="B", show="B", rel_tol=0.001)
    with pytest.raises(AskAgain, match="1 significant figure"):
        check_answer(FRACTION, 0.4375, "0.4")
    with pytest.raises(AskAgain, match="1 significant figure"):
        check_answer(exact, 8_300_000, "8 MB")  # 7.9 MB would be the MiB slip, but "8" cannot tell
    assert "MB vs MiB" in check_answer(exact, 8_388_608, "8 MB").mistake  # 8 MiB typed as MB: exactly the slip


@pytest.mark.parametrize("ask, expected, text", [
    (Ask("n", "blocks", unit="1", rel_tol=0, noun="block"), 7680, "7.68k"),
    (Ask("n", "blocks", unit="1", rel_tol=0, noun="block"), 7680, "7,680 blocks"),
    (Ask("n", "blocks", unit="1", rel_tol=0, noun="block"), 1280, "1280 blocks"),
    (Ask("n", "blocks", unit="1", rel_tol=0, noun="block"), 1280, "1.28k blocks"),
    (Ask("n", "blocks", unit="1", rel_tol=0, noun="block"), 1, "1 block"),
    (Ask("r", "ratio", unit="1", show="x", rel_tol=0.03), 1.2, "1.2x"),
    (Ask("r", "ratio", unit="1", show="x", rel_tol=0.03), 1.2, "1.2 \u00d7"),
    (Ask("r", "ratio", unit="1", show="x", rel_tol=0.03), 9.0, "9 times"),
    (FRACTION, 7 / 23, "30%"),
    (FRACTION, 7 / 23, "about 30 %"),
    (FRACTION, 7 / 16, "about 7/16"),
    (FRACTION, 7 / 16, "~ 7 / 16"),
    (Ask("b", "busbw", unit="B/s", show="GB/s", rel_tol=0.01), 85.33, "~85.3GB/s"),
    (Ask("b", "busbw", unit="B/s", show="GB/s", rel_tol=0.01), 85.33, "about 85"),
    (Ask("b", "busbw", unit="B/s", show="GB/s", rel_tol=0.001), 85.33, "about 85"),
])
def test_right_answers_the_issue_found_refused_are_read(ask, expected, text):
    assert check_answer(ask, expected, text).correct, check_answer(ask, expected, text)


def test_a_count_names_its_noun_when_another_is_typed():
    blocks = Ask("n", "blocks", unit="1", rel_tol=0, noun="block")
    with pytest.raises(ValueError, match="or blocks"):
        parse_answer("1280 tokens", "1", noun="block")
    assert parse_answer("about 1,280 blocks", "1", noun="block").value == 1280
    assert not check_answer(blocks, 1280, "1279 blocks").correct


def test_a_byte_count_for_a_gb_prompt_is_sent_back_never_a_giant_percentage():
    gb = Ask("t", "memory", unit="B", show="GB")
    with pytest.raises(AskAgain, match="looks like bytes; the question asks GB"):
        check_answer(gb, 18.37, "18365975040")
    with pytest.raises(AskAgain, match="looks like seconds; the question asks ms"):
        check_answer(MS, 15.9, "0.0159")
    assert check_answer(gb, 18.37, "18365975040 B").correct  # with its unit it is simply right


@settings(max_examples=300, deadline=None)
@given(expected=st.floats(min_value=1e-3, max_value=1e3), typed=st.floats(min_value=1e-30, max_value=1e30),
       show=st.sampled_from(["GB", "MB", "B", "GiB"]))
def test_no_answer_prints_an_unreadable_percentage(expected, typed, show):
    ask = Ask("t", "size", unit="B", show=show)
    try:
        verdict = check_answer(ask, expected, f"{typed!r}")
    except AskAgain:
        return
    assert not re.search(r"[+-]\d{4,}%", verdict.message), verdict.message
    assert "e+" not in verdict.message.split("The answer")[0] and "e-" not in verdict.message.split("The answer")[0]


SPELLINGS = {  # dimension -> (unit as typed, its scale to the base unit)
    "B": [("B", 1), ("kB", 1e3), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12), ("KiB", 2**10), ("MiB", 2**20),
          ("GiB", 2**30), ("Gb", 1e9 / 8), ("Mbit", 1e6 / 8)],
    "s": [("s", 1), ("ms", 1e-3), ("us", 1e-6), ("\u00b5s", 1e-6), ("ns", 1e-9)],
    "B/s": [("GB/s", 1e9), ("MB/s", 1e6), ("GiB/s", 2**30), ("Gb/s", 1e9 / 8), ("Gbps", 1e9 / 8), ("B/s", 1)],
    "1": [("", 1), ("x", 1), ("%", 0.01), ("k", 1e3)],
}


@settings(max_examples=500, deadline=None)
@given(dim=st.sampled_from(sorted(SPELLINGS)), mantissa=st.floats(min_value=1, max_value=10), exp=st.integers(-6, 15),
       pick=st.integers(0, 10), digits=st.integers(3, 8), approx=st.sampled_from(["", "~", "about ", "\u2248"]),
       rel_tol=st.sampled_from([0.0, 0.001, 0.02]))
def test_any_value_equal_at_the_precision_typed_is_right_in_any_spelling(dim, mantissa, exp, pick, digits, approx,
                                                                         rel_tol):
    """The answer rounded to 3-8 significant figures, in any accepted unit, with or without "about", is right."""
    expected = mantissa * 10.0**exp
    unit, scale = SPELLINGS[dim][pick % len(SPELLINGS[dim])]
    ask = Ask("a", "answer", unit=dim, rel_tol=rel_tol, world_size="n")
    text = f"{approx}{expected / scale:.{digits - 1}e} {unit}".strip()  # e-notation keeps trailing zeros
    verdict = check_answer(ask, expected, text, {"n": 8})
    assert verdict.correct, (text, verdict)


@settings(max_examples=200, deadline=None)
@given(expected=st.floats(min_value=1e3, max_value=1e15), err=st.floats(min_value=-0.019, max_value=0.019))
def test_within_tolerance_is_right(expected, err):
    assert check_answer(TOTAL, expected, f"{expected * (1 + err)!r}", {"n": 8}).correct
