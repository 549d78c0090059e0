"""The notebook practice widget, driven as a learner would: type into the boxes, click."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

pytest.importorskip("ipywidgets")

from ringlab.viz.practice import practice_widget  # noqa: E402


def test_type_and_check_a_drawn_card():
    w = practice_widget("08", seed=3)
    p, m = map(int, re.search(r"P = (\d+) .* M = (\d+) micro", w.question.value, flags=re.S).groups())
    w.boxes["ideal"].value = str(Fraction(p - 1, m))  # e.g. "7/16"
    w.boxes["total"].value = f"{(p - 1) / m:.4f}"  # the other measure: named as such
    w.check.click()
    lines = w.feedback.value.split("<br>")
    assert lines[0].startswith("bubble relative to the ideal compute time: right")
    assert "that is the bubble relative to the ideal compute time" in lines[1]


def test_units_slips_show_in_the_feedback():
    w = practice_widget("05", seed=0)
    total = w.card.expected["total"]
    w.boxes["per_token"].value = "3 ms"
    w.boxes["total"].value = f"{total / 2**30:.4f} GB"  # the GiB figure labelled GB
    w.check.click()
    assert "wrong units" in w.feedback.value and "GB vs GiB confusion" in w.feedback.value


def test_hints_reveal_and_new_numbers():
    w = practice_widget("06", seed=0)
    w.hint.click()
    w.hint.click()
    assert "hint 2/3" in w.feedback.value and "hint 3/3" not in w.feedback.value
    w.reveal.click()
    assert "RUBRIC" in w.feedback.value and "Roofline time" in w.feedback.value
    before = w.question.value
    w.new.click()
    assert w.seed == 1 and w.question.value != before and w.feedback.value == ""
    w.boxes["ai"].value = ""
    w.check.click()
    assert "(no answer yet)" in w.feedback.value


def test_unknown_card_is_a_value_error():
    with pytest.raises(ValueError, match="unknown card"):
        practice_widget("99")
