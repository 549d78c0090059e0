"""The design interview: the layout a learner types, and the interviewer's answer."""

import pytest

from ringlab.plan.design import PROMPTS, check_design, draw_prompt, parse_layout


def test_parse_layout_fills_dp_and_reads_names():
    out = parse_layout("tp=8 pp=8 zero=1 recompute=selective", 512)
    assert (out["dp"], out["tp"], out["pp"], out["zero"], out["recompute"]) == (8, 8, 8, "zero1", "selective")
    assert parse_layout("dp=64, zero=fsdp, mb=2", 64)["zero"] == "zero3"


@pytest.mark.parametrize("text, word", [("", "type a layout"), ("tp=8 tp=4", "twice"), ("xp=2", "key among"),
                                        ("tp=0", "whole number"), ("zero=5", "zero="), ("recompute=some", "recompute"),
                                        ("dp=3 tp=8", "512 GPUs"), ("tp=3 pp=1", "does not divide")])
def test_bad_layouts_are_refused_with_one_line(text, word):
    with pytest.raises(ValueError, match=word) as info:
        parse_layout(text, 512)
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_the_interviewer_answers_with_the_calculators_numbers():
    prompt = draw_prompt(0)
    assert PROMPTS[0][0] in prompt.text() and f"{prompt.days} days" in prompt.text()
    best = check_design(prompt, prompt.search.best.candidate.describe().replace("vp=", "vp="))
    assert best.fits and best.ratio == pytest.approx(1.0) and best.verdict == "strong"
    assert best.days <= prompt.days  # the deadline is 1.25 x the best layout's days, rounded up
    worse = check_design(prompt, "dp=8 tp=8 pp=1 zero=1 recompute=full")
    assert worse.fits and worse.ratio > 1.25 and worse.verdict == "weak"
    tight = check_design(prompt, "dp=64 zero=0 recompute=none mb=8")
    assert not tight.fits and tight.verdict == "does not fit" and "does not fit" in tight.lines[1]


@pytest.mark.slow
def test_practice_design_on_the_command_line(capsys):
    from ringlab.cli import main

    assert main(["practice", "--design", "--seed", "0", "--layout", "dp=8 tp=8 pp=1 zero=1 recompute=full"]) == 0
    out = capsys.readouterr().out
    assert "Train llama-3-8b" in out and "Predicted:" in out and "What costs you most" in out
    with pytest.raises(SystemExit) as info:
        main(["practice", "--design", "--seed", "0", "--layout", "dp=3 tp=8"])
    assert info.value.code == 2 and "--layout: dp x tp x pp x cp = 24" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["practice", "--layout", "tp=8"])
    assert info.value.code == 2 and "give --design too" in capsys.readouterr().err
