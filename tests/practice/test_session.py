"""Scripted practice sessions through the CLI: drawn numbers, typed answers checked with units, hints,
the rubric, the record, mock interviews, and clean ends on end-of-input and Ctrl-C."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.check.cards import load_card
from ringlab.commands import practice
from ringlab.practice import state
from ringlab.practice.session import Session, prepare


def run(argv, lines, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    code = practice.main(argv)
    return code, capsys.readouterr()


def bubble_question(out: str) -> tuple[int, int]:
    m = re.search(r"P = (\d+) pipeline stages and each optimizer step runs M = (\d+) micro-batches", out)
    return int(m.group(1)), int(m.group(2))


def test_same_seed_same_question_other_seed_other_question(monkeypatch, capsys):
    seen = {}
    for seed in (1, 2, 3, 4, 1):
        _, cap = run(["--session", "08", "--seed", str(seed)], [], monkeypatch, capsys)
        seen.setdefault(seed, set()).add(bubble_question(cap.out))
    assert len(seen[1]) == 1  # replayed exactly
    assert len({q for qs in seen.values() for q in qs}) >= 3


def test_right_answers_from_the_question_text_score_full_marks(monkeypatch, capsys):
    _, cap = run(["--session", "08", "--seed", "5"], [], monkeypatch, capsys)
    p, m = bubble_question(cap.out)  # worked here from the printed question: (P-1)/M and (P-1)/(M+P-1)
    ideal, wall = Fraction(p - 1, m), Fraction(p - 1, m + p - 1)
    code, cap = run(["--session", "08", "--seed", "5"],
                    [f"{float(ideal):.4f}", f"{wall.numerator}/{wall.denominator}", "y", "y", "y"], monkeypatch, capsys)
    assert code == 0
    assert cap.out.count("  right: ") == 2 and "score 100%" in cap.out
    record = json.loads(state.state_path().read_text())
    assert record["cards"]["08"] == {**record["cards"]["08"], "attempts": 1, "right": 2, "wrong": 0, "score": 1.0}
    assert record["sessions"][-1]["seed"] == 5 and record["mistakes"] == []


def test_gib_confusion_is_named_and_recorded(monkeypatch, capsys):
    card = prepare("05", 11)
    total = card.expected["total"]
    wrong = f"{total / 1e9:.3f} GiB"  # the GB figure labelled GiB
    code, cap = run(["--session", "05", "--seed", "11"], [str(card.expected["per_token"]), wrong, "n", "n"],
                    monkeypatch, capsys)
    assert code == 0 and "GB vs GiB confusion" in cap.out
    mistakes = json.loads(state.state_path().read_text())["mistakes"]
    assert [m["ask"] for m in mistakes] == ["total"] and "GB vs GiB" in mistakes[0]["mistake"]
    assert mistakes[0]["answer"] == wrong and mistakes[0]["seed"] == 11


def test_per_rank_vs_total_and_wrong_units_are_named(monkeypatch, capsys):
    card = prepare("04", 2)
    n = card.params["n"]
    ddp = card.expected["ddp_bytes"]
    _, cap = run(["--session", "04", "--seed", "2"], [f"{ddp * n:.6e} B", "12 ms", "n", "n", "n"],
                 monkeypatch, capsys)
    assert "per-rank vs total" in cap.out and "wrong units: 'ms' is a time" in cap.out
    assert "mistakes:" in cap.out and "04 fsdp_bytes: '12 ms': wrong units" in cap.out


def test_hints_come_one_at_a_time_before_the_answer(monkeypatch, capsys):
    _, cap = run(["--session", "06", "--fixed"], ["h", "h", "h", "h", "s", "s", "n", "n"], monkeypatch, capsys)
    hints = load_card("06").hints
    for i, hint in enumerate(hints, start=1):
        assert f"hint {i}/{len(hints)}: {hint}" in cap.out
    assert "no more hints" in cap.out
    assert cap.out.index("hint 3/3") < cap.out.index("\nANSWER\n")


def test_unreadable_input_is_asked_again_not_graded(monkeypatch, capsys):
    _, cap = run(["--session", "08", "--fixed"], ["abc", "0.4375\x07", "0.4375", "7/23", "maybe", "y", "y", "y"],
                 monkeypatch, capsys)
    assert "not read: 'abc' is not a number" in cap.out
    assert "control characters" in cap.out and "type y or n" in cap.out and "score 100%" in cap.out


def test_cards_without_numbers_are_self_marked(monkeypatch, capsys):
    _, cap = run(["--session", "10", "--fixed"], ["", "y", "n", "y", "y"], monkeypatch, capsys)
    assert "Enter shows the answer" in cap.out and "score 75%" in cap.out


def test_end_of_input_mid_session_saves_what_was_done(monkeypatch, capsys):
    code, cap = run(["--session", "08", "01", "--fixed"], ["0.4375", "7/23", "y", "y", "y", "1"], monkeypatch, capsys)
    assert code == 0 and "session ended; what was done is saved" in cap.out
    record = json.loads(state.state_path().read_text())
    assert record["cards"]["08"]["score"] == 1.0
    assert record["cards"]["01"]["attempts"] == 1 and record["cards"]["01"]["score"] is None  # begun, unfinished
    assert "(unfinished)" in cap.out


def test_ctrl_c_ends_cleanly(monkeypatch, capsys):
    def interrupt(prompt=""):
        raise KeyboardInterrupt

    monkeypatch.setattr("builtins.input", interrupt)
    assert practice.main(["--session", "05", "--seed", "1"]) == 0
    assert "session ended" in capsys.readouterr().out


def test_quit_command(monkeypatch, capsys):
    _, cap = run(["--session", "05", "06", "--fixed"], ["q"], monkeypatch, capsys)
    assert "session ended" in cap.out and "=== card 2/2" not in cap.out


def test_topic_slug_and_old_id_pick_the_card(monkeypatch, capsys):
    _, cap = run(["--session", "kv_cache", "P10", "--fixed"], [], monkeypatch, capsys)
    assert "05 KV-cache memory" in cap.out and "card P10 is now 08" in cap.err


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_mock_interview_enforces_the_limit_and_summarises():
    clock, out = FakeClock(), []
    script = iter(["h", "0.4375", "n", "n", "n", "", "y", "y", "y", "y"])

    def read(prompt):
        out.append(prompt)
        clock.t += 200  # each line takes 200 s
        return next(script)

    results = Session(["08", "10"], seed=None, budget_s=300, mock=True, read=read, write=out.append,
                      clock=clock, save=False).run()
    text = "\n".join(out)
    assert "limit 5:00" in text and "time is up for this card" in text
    assert results[0].timed_out and results[0].answers[0][2].correct and len(results[0].answers) == 1
    assert "(time ran out)" in text and "mock interview summary: 2 of 2 cards" in text
    assert re.search(r"08 Pipeline bubble\s+20%\s+6:40 over time", text)  # 1 of 5 rubric points; 400 s
    assert "(1:40 left)" in text and "over by" not in text  # the limit stops the card before it runs over


def test_session_budget_is_visible_and_soft():
    clock, out = FakeClock(), []
    script = iter(["0.4375", "7/23", "y", "y", "y"])

    def read(prompt):
        out.append(prompt)
        clock.t += 200
        return next(script)

    Session(["08"], seed=None, budget_s=300, read=read, write=out.append, clock=clock, save=False).run()
    text = "\n".join(out)
    assert "(5:00 left)" in text and "(1:40 left)" in text  # the second prompt, 200 s later
    assert "time is up" not in text and "score 100%" in text


@pytest.mark.parametrize("argv", [["--budget", "0"], ["--mock", "99"], ["--seed", "-1"], ["--mock", "2", "--random", "2"],
                                  ["--session", "--reveal"], ["--seed", "3", "05"], ["--fixed", "--seed", "1", "--session"],
                                  ["--session", "nope"], ["--budget", "2h"]])
def test_bad_options_exit_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        practice.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("ringlab practice: error:")


def test_reset_and_progress(monkeypatch, capsys):
    run(["--session", "08", "--fixed"], ["0.3", "7/23", "n", "n", "n"], monkeypatch, capsys)
    assert practice.main(["--progress"]) == 0
    out = capsys.readouterr().out
    assert "08  attempts   1" in out and "08 ideal: '0.3': wrong value" in out
    assert practice.main(["--reset"]) == 0 and "deleted" in capsys.readouterr().out
    assert not state.state_path().exists()


def test_random_pick_is_seeded(monkeypatch, capsys):
    picks = []
    for _ in range(2):
        _, cap = run(["--random", "3", "--seed", "9"], [], monkeypatch, capsys)
        picks.append(re.findall(r"=== card \d/3 · (\d\d) ", cap.out))
    assert picks[0] == picks[1] and len(picks[0]) == 1  # end of input after the first card


def test_closed_stdin_session_ends_without_hanging(state_home):
    env = {"XDG_STATE_HOME": str(state_home), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "ringlab", "practice", "--mock", "3", "--seed", "4"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "seed 4" in proc.stdout and "mock interview summary: 0 of 3 cards" in proc.stdout


TOKENS = st.one_of(st.sampled_from(["h", "s", "q", "", "y", "n", "yes", "maybe", "7/16", "0.4375", "40 GB", "3 ms",
                                    "1e999", "nan", "-1", "1/0", "x" * 150]), st.text(max_size=20))


@settings(max_examples=60, deadline=None)
@given(cid=st.sampled_from(["01", "05", "08", "10", "16"]), seed=st.integers(0, 2**32), lines=st.lists(TOKENS, max_size=30))
def test_any_keyboard_input_ends_cleanly(cid, seed, lines):
    """Whatever is typed, a session ends (end of input, q, or done) without an exception and scores in [0, 1]."""
    clock, out, script = FakeClock(), [], iter(lines)

    def read(prompt):
        clock.t += 7
        try:
            return next(script)
        except StopIteration:  # the script ran out: end of input
            raise EOFError from None

    results = Session([cid], seed=seed, mock=bool(seed % 2), budget_s=60, read=read, write=out.append,
                      clock=clock, save=False).run()
    assert len(results) == 1
    assert results[0].score is None or 0 <= results[0].score <= 1


def test_q_at_a_rubric_prompt_ends_the_session_and_keeps_the_answers(monkeypatch, capsys):
    _, cap = run(["--session", "08", "--seed", "5"], [], monkeypatch, capsys)
    p, m = bubble_question(cap.out)
    ideal, wall = Fraction(p - 1, m), Fraction(p - 1, m + p - 1)
    code, cap = run(["--session", "08", "--seed", "5"],
                    [f"{float(ideal):.4f}", f"{wall.numerator}/{wall.denominator}", "q", "never read"],
                    monkeypatch, capsys)
    assert code == 0 and "type y or n" not in cap.out and "session ended" in cap.out
    assert json.loads(state.state_path().read_text())["cards"]["08"]["right"] == 2
