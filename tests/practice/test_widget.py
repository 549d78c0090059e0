"""The notebook practice widget, driven as a learner would: type into the boxes, click; a wrong number gets its
slip or a hint and a second try before its answer is shown."""

from __future__ import annotations

import html
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
    assert "The answer" not in w.feedback.value and "second try" in w.feedback.value  # not revealed yet


def test_the_answer_is_shown_after_the_second_wrong_try_only():
    w = practice_widget("14", seed=3)
    worked = f"The answer: {w.card.expected['hits']:,}"
    w.boxes["hits"].value = "3"
    w.check.click()
    first = w.feedback.value
    assert worked not in first and "wrong value" in first
    assert html.escape(w.card.hints_for("hits")[0]) in first  # the hint about this number, not hint 1 of the card
    assert html.escape(w.card.hints[0]) not in first
    w.check.click()  # the same text again does not spend the second try
    assert w.tries["hits"] == 1 and worked not in w.feedback.value
    w.boxes["hits"].value = "4 blocks"
    w.check.click()
    assert worked in w.feedback.value and w.tries["hits"] == 2
    w.boxes["hits"].value = str(w.card.expected["hits"])  # settled: a later right answer changes nothing
    w.check.click()
    assert worked in w.feedback.value


def test_right_on_the_second_try_and_asks_again_without_spending_a_try():
    w = practice_widget("17", seed=0)
    act = w.card.expected["act_gb"]
    w.boxes["act_gb"].value = f"{act * 1e9:.0f}"  # bytes for a GB prompt
    w.check.click()
    assert "looks like bytes" in w.feedback.value and w.tries["act_gb"] == 0
    w.boxes["act_gb"].value = f"{w.card.values['wrong_flight_act_gb']:.3f} GB"
    w.check.click()
    assert "one micro-batch in flight" in w.feedback.value and w.tries["act_gb"] == 1
    w.boxes["act_gb"].value = f"{act:.3f} GB"
    w.check.click()
    assert "right" in w.feedback.value.split("<br>")[0]


def test_the_hint_button_follows_the_first_unsettled_number():
    w = practice_widget("14", seed=1)
    for key in ("block_bytes", "blocks"):
        w.boxes[key].value = str(w.card.expected[key])
    w.check.click()
    w.hint.click()
    assert html.escape(w.card.hints_for("hits")[0]) in w.feedback.value
    assert "blocks saved by sharing the system prompt: hint 1/" in w.feedback.value


def test_hints_reveal_and_new_numbers():
    w = practice_widget("06", seed=0)
    w.hint.click()
    w.hint.click()  # the first number asked (intensity) has two hints; the third is about the time
    assert "hint 2/2" in w.feedback.value
    w.hint.click()
    assert "no more hints" in w.feedback.value
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


def test_a_click_handled_before_the_typed_text_arrives_is_judged_on_the_text():
    # ipykernel can run the Check click before the box's value update that the browser sent first
    w = practice_widget("08", seed=3)
    p, m = map(int, re.search(r"P = (\d+) .* M = (\d+) micro", w.question.value, flags=re.S).groups())
    w.check.click()  # the click first: the box still holds the old (empty) text
    assert "no answer yet" in w.feedback.value
    w.boxes["ideal"].value = str(Fraction(p - 1, m))  # then the text the learner typed before clicking
    assert w.feedback.value.split("<br>")[0].startswith("bubble relative to the ideal compute time: right")
    assert w.tries["ideal"] == 1


def test_text_typed_before_any_check_is_not_judged_until_check():
    w = practice_widget("08", seed=3)
    w.boxes["ideal"].value = "0.5"
    assert w.feedback.value == "" and w.tries["ideal"] == 0
