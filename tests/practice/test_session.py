"""Scripted practice sessions through the CLI: drawn numbers, typed answers checked with units, a second try
after a wrong number, hints about the number asked, the rubric, the record (merged with other sessions, kept
when it cannot be written), mock interviews, and clean ends on end-of-input and Ctrl-C."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tempfile
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
    code, cap = run(["--session", "05", "--seed", "11"], [str(card.expected["per_token"]), wrong, "s", "n", "n"],
                    monkeypatch, capsys)
    assert code == 0 and "GB vs GiB confusion" in cap.out
    mistakes = json.loads(state.state_path().read_text())["mistakes"]
    assert [m["ask"] for m in mistakes] == ["total"] and "GB vs GiB" in mistakes[0]["mistake"]
    assert mistakes[0]["answer"] == wrong and mistakes[0]["seed"] == 11


def test_per_rank_vs_total_and_wrong_units_are_named(monkeypatch, capsys):
    card = prepare("04", 2)
    n = card.params["n"]
    ddp = card.expected["ddp_bytes"]
    _, cap = run(["--session", "04", "--seed", "2"], [f"{ddp * n:.6e} B", "s", "12 ms", "13 ms", "n", "n", "n"],
                 monkeypatch, capsys)
    assert "per-rank vs total" in cap.out and "wrong units: 'ms' is a time" in cap.out
    assert "mistakes:" in cap.out and "04 fsdp_bytes: '12 ms': wrong units" in cap.out


def test_hints_come_one_at_a_time_before_the_answer(monkeypatch, capsys):
    _, cap = run(["--session", "06", "--fixed"], ["h", "h", "h", "s", "h", "h", "h", "h", "s", "n", "n"],
                 monkeypatch, capsys)
    card = load_card("06")
    ai, time_ms = card.hints_for("ai"), card.hints_for("time_ms")  # the last hint is about the time only
    assert len(ai) == 2 and len(time_ms) == 3 and time_ms[:2] == ai
    for i, hint in enumerate(time_ms, start=1):
        assert f"hint {i}/{len(time_ms)}: {hint}" in cap.out
    assert f"hint 1/2: {ai[0]}" in cap.out and cap.out.count("no more hints") == 2
    assert cap.out.index(f"hint 2/2: {ai[1]}") < cap.out.index(f"hint 1/3: {time_ms[0]}")
    assert cap.out.index("hint 3/3") < cap.out.index("\nANSWER\n")


def test_a_wrong_number_gets_its_slip_and_a_second_try_before_the_answer(monkeypatch, capsys):
    card = prepare("05", 11)
    total = card.expected["total"]
    code, cap = run(["--session", "05", "--seed", "11"],
                    [str(card.expected["per_token"]), f"{total / 1e9:.3f} GiB", f"{total / 2**30:.2f} GiB", "y", "n"],
                    monkeypatch, capsys)
    out = cap.out
    first = out.index("GB vs GiB confusion")
    assert "Try again" in out[first:first + 200] and "second try" in out[first:]
    assert out.index("KV cache of the whole batch [B] (second try)") > first
    worked = f"{int(total):,} B"
    assert out.index(worked) > out.index("(second try)")  # the answer only after the second try, which is right
    assert "(marked from your answer on the second try)" in out
    record = json.loads(state.state_path().read_text())
    assert record["cards"]["05"]["right"] == 2 and record["cards"]["05"]["wrong"] == 0
    assert [m["ask"] for m in record["mistakes"]] == ["total"]  # the slip is kept for review


def test_two_wrong_tries_show_the_answer_and_an_unnamed_slip_gets_the_hint_about_that_number(monkeypatch, capsys):
    card = prepare("14", 3)
    hits_hint = card.hints_for("hits")[0]
    lines = [str(card.expected["block_bytes"]), str(card.expected["blocks"]), "3", "4", "n", "n"]
    _, cap = run(["--session", "14", "--seed", "3"], lines, monkeypatch, capsys)
    out = cap.out
    assert "wrong value" in out and f"hint 1/{len(card.hints_for('hits'))}: {hits_hint}" in out
    assert card.hints[0] not in out  # the hint about block bytes is not offered for the third question
    assert out.index(hits_hint) < out.index("blocks saved by sharing the system prompt [number] (second try)")
    assert out.count(f"The answer: {card.expected['hits']:,}") == 1 and "'3': wrong value" in out
    record = json.loads(state.state_path().read_text())
    assert record["cards"]["14"]["right"] == 2 and record["cards"]["14"]["wrong"] == 1


def test_a_byte_count_for_a_gb_prompt_does_not_spend_the_try(monkeypatch, capsys):
    card = load_card("17")
    act = card.expected["act_gb"]
    _, cap = run(["--session", "17"], [f"{act * 1e9:.0f}", f"{act:.2f}", "s", "n", "n", "n"], monkeypatch, capsys)
    assert "that looks like bytes; the question asks GB" in cap.out and "(second try)" not in cap.out
    assert "right:" in cap.out


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
    run(["--session", "08", "--fixed"], ["0.2", "0.21", "7/23", "n", "n", "n"], monkeypatch, capsys)
    assert practice.main(["--progress"]) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.split()[:1] == ["08"])
    assert row[:4] == ["08", "1", "1", "1"] and "08 ideal: '0.2': wrong value" in out
    assert practice.main(["--reset"]) == 0 and "deleted" in capsys.readouterr().out
    assert not state.state_path().exists()


@pytest.mark.parametrize("argv", [["--progress", "--reset"], ["--reset", "--progress"], ["--reset", "05"],
                                  ["--progress", "--session"], ["--reset", "--mock", "2"]])
def test_progress_and_reset_are_refused_with_anything_else(argv, monkeypatch, capsys):
    run(["--session", "08", "--fixed"], ["7/16", "7/23", "n", "n", "n"], monkeypatch, capsys)
    with pytest.raises(SystemExit) as exc:
        practice.main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and ("not both" in err or "takes no" in err)
    assert json.loads(state.state_path().read_text())["cards"]["08"]["attempts"] == 1  # nothing deleted


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


def _bubble_script():
    return iter(["7/16", "7/23", "y", "y", "y"])


def test_an_unwritable_record_loses_nothing(monkeypatch, tmp_path):
    """The folder cannot be written: the session runs to the end, says so once, and writes its cards to a
    fallback file (before, it crashed at the save and lost the card)."""
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    real_mkstemp = tempfile.mkstemp
    monkeypatch.setattr(tempfile, "mkstemp", refuse)  # the record's temporary file cannot be created
    fallback_dir = tmp_path / "fallback"
    fallback_dir.mkdir()
    monkeypatch.setattr(state, "save_fallback", lambda data: _fallback(data, fallback_dir, real_mkstemp))
    out, script = [], _bubble_script()
    results = Session(["08"], seed=None, read=lambda p: next(script), write=out.append).run()
    text = "\n".join(out)
    assert results[0].finished and "could not save your practice record" in text
    assert text.count("note: could not save") == 1
    saved = json.loads(next(fallback_dir.iterdir()).read_text())
    assert saved["cards"]["08"]["right"] == 2 and saved["sessions"][0]["cards"] == ["08"]
    assert "this session's record is in" in text and "progress saved" not in text


def _fallback(data, folder, mkstemp):
    fd, name = mkstemp(dir=folder, suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    return name


def test_when_even_the_fallback_fails_the_record_is_printed(monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(state, "update", refuse)
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    out, script = [], _bubble_script()
    Session(["08"], seed=None, read=lambda p: next(script), write=out.append).run()
    text = "\n".join(out)
    printed = json.loads(text[text.index("this session's record:\n") + len("this session's record:\n"):])
    assert printed["cards"]["08"]["attempts"] == 1


def test_a_record_that_cannot_be_read_is_kept_and_the_session_goes_on(monkeypatch, capsys):
    old = state.empty()
    state.record_card(old, "01", 1, 0, 1.0, [], seed=1)
    path = state.save(old)
    path.write_bytes(b"\xff\xfe not a record")
    code, cap = run(["--session", "08", "--fixed"], ["7/16", "7/23", "y", "y", "y"], monkeypatch, capsys)
    assert code == 0 and "note: " in cap.out and "moved it to" in cap.out
    assert path.with_name("practice.json.corrupt").read_bytes() == b"\xff\xfe not a record"
    assert json.loads(path.read_text())["cards"]["08"]["score"] == 1.0


def test_two_sessions_at_once_keep_both_cards():
    """Session A loads, B runs a whole card and saves while A waits at a prompt, then A saves: both cards stay."""
    out_b, script_b = [], iter(["0.5", "s", "s", "n", "n", "n"])
    script_a = iter(["7/16", "7/23", "y", "y", "y"])

    def read_a(prompt):
        if "ideal" in prompt and not out_b:  # A's first prompt: B runs now, from start to end
            Session(["01"], seed=None, read=lambda p: next(script_b), write=out_b.append).run()
        return next(script_a)

    Session(["08"], seed=None, read=read_a, write=lambda _: None).run()
    data = json.loads(state.state_path().read_text())
    assert set(data["cards"]) == {"01", "08"} and len(data["sessions"]) == 2


def test_a_state_folder_that_cannot_be_created_loses_nothing(tmp_path):
    """A real failure, no monkeypatching: on Linux /proc/self takes no new folder (on other systems a read-only
    folder, where the user is not root)."""
    if sys.platform.startswith("linux"):
        home = "/proc/self"
    else:
        home = tmp_path / "ro"
        home.mkdir()
        home.chmod(0o500)
        if os.access(home, os.W_OK):
            pytest.skip("running as a user who can write a read-only folder, off Linux")
    env = {**os.environ, "XDG_STATE_HOME": str(home), "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "ringlab", "practice", "--session", "08", "--fixed"],
                          input="7/16\n7/23\ny\ny\ny\n", capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "this session's record is in" in proc.stdout and "Traceback" not in proc.stderr
    saved = json.loads(next(tmp_path.glob("ringlab-practice-*.json")).read_text())
    assert saved["cards"]["08"]["right"] == 2
