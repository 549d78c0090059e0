"""``ringlab practice``: interview practice cards.

    ringlab practice                      list the cards (* = numbers drawn fresh each session) and your progress
    ringlab practice 05                   one card: the question, Enter, the worked answer (old ids P5 work)
    ringlab practice --session 05 roofline    a session: the clock, numbers to type in, hints, rubric
    ringlab practice --session --random 3     three cards at random
    ringlab practice --mock 4 --seed 7    a 4-card timed mock interview with a summary (replay with the seed)
    ringlab practice --progress           your record;  --reset deletes it (one or the other)
"""

from __future__ import annotations

import argparse
import secrets
import sys

import numpy as np

from ringlab import cli_args
from ringlab.check.cards import card_ids, is_parametrised, load_card, resolve
from ringlab.course import get_topic
from ringlab.plan.design import check_design, draw_prompt
from ringlab.practice import state
from ringlab.practice.session import Session
from ringlab.textfmt import table, wrap, wrap_lines

BUDGET_MAX_S = 3600.0


def _card_of(key: str) -> tuple[str, str | None]:
    """A card id for a number, an old id (P5) or a topic slug (kv_cache). Raises ValueError."""
    try:
        return resolve(key)
    except ValueError:
        try:
            topic = get_topic(key)
        except ValueError:
            topic = None
        if topic is None or topic.id not in card_ids():
            raise
        return topic.id, None


def _parser() -> cli_args.ArgumentParser:
    p = cli_args.ArgumentParser(prog="ringlab practice", description=__doc__.replace("``", ""),
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="At a prompt: h = next hint about that number, s = show its answer, "
                                       "q = quit (Ctrl-D too).")
    p.add_argument("cards", nargs="*", type=cli_args.text(max_len=64),
                   help="card numbers (05), old ids (P5) or topic slugs (kv_cache); omit to list them")
    p.add_argument("--reveal", action="store_true", help="one card: print the answer without waiting for Enter")
    p.add_argument("--session", action="store_true", help="practise the cards as a session (clock, typed answers)")
    p.add_argument("--random", type=cli_args.integer(min=1, max=99), metavar="N",
                   help="a session of N cards picked at random (from the cards named, or all)")
    p.add_argument("--mock", type=cli_args.integer(min=1, max=99), metavar="N",
                   help="a timed mock interview of N random cards: the budget is a limit; summary at the end")
    p.add_argument("--seed", type=cli_args.integer(min=0, max=2**63 - 1),
                   help="seed of the drawn numbers and the random pick (default: a fresh one, printed)")
    p.add_argument("--fixed", action="store_true", help="session with the fixed numbers of the problem set")
    p.add_argument("--budget", type=cli_args.duration(unit="min", max=BUDGET_MAX_S), default=None,
                   help="time per card of a session, e.g. 5 (minutes), 90s (default 5 min)")
    p.add_argument("--design", action="store_true",
                   help="a design interview: a training job to lay out; type dp= tp= pp= ... and get the interviewer's "
                        "answer (--seed picks the job, --layout answers without a prompt)")
    p.add_argument("--layout", type=cli_args.text(max_len=200), default=None,
                   help="with --design: the layout, e.g. 'dp=8 tp=8 pp=8 zero=1 recompute=selective'")
    p.add_argument("--progress", action="store_true", help="print your practice record and exit")
    p.add_argument("--reset", action="store_true", help="delete your practice record and exit")
    return p


def _list() -> int:
    record = state.load()["cards"]
    rows = []
    for cid in card_ids():
        done = record.get(cid)
        tried = f"{done['attempts']}x, {done['score']:.0%}" if done and done.get("score") is not None else "-"
        rows.append([cid + ("*" if is_parametrised(cid) else ""), get_topic(cid).slug, tried, load_card(cid).title])
    print("\n".join(table(["card", "topic", "last score", "question"], rows, align="llrl")))
    print("\n" + wrap("* numbers drawn fresh in a session. Try 'ringlab practice 05', "
                      "'ringlab practice --session 05' or 'ringlab practice --mock 3'.", hang="  "))
    return 0


def _progress() -> int:
    data = state.load()
    if not data["cards"]:
        print(f"no practice recorded yet ({state.state_path()})")
        return 0
    rows = [[cid, str(e["attempts"]), str(e["right"]), str(e["wrong"]),
             f"{e['score']:.0%}" if e.get("score") is not None else "-", str(e["last"])]
            for cid, e in sorted(data["cards"].items())]
    print("\n".join(table(["card", "attempts", "right", "wrong", "last score", "last tried"], rows, align="lrrrrl")))
    if data["mistakes"]:
        print("\nrecent mistakes:")
        for m in data["mistakes"][-10:]:
            print(wrap(f"{m['card']} {m['ask']}: {m['answer']!r}: {m['mistake']}", indent="  "))
    print(f"\n{state.state_path()}")
    return 0


def _single(card_id: str, reveal: bool) -> int:
    card = load_card(card_id)
    print(wrap_lines(card.text(reveal=False), hang=""))
    if not reveal:
        print("\n[think it through, then press Enter for the worked answer]", flush=True)
        try:
            input()
        except EOFError:  # no terminal (a pipe, CI): show the answer
            pass
    print(wrap_lines("\nANSWER\n" + card.answer + "\n\nFOLLOW-UPS\n" + card.followups, hang=""))
    return 0


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.design or args.layout is not None:
        return _design(parser, args)
    if args.progress and args.reset:
        parser.error("give --progress or --reset, not both (--reset deletes the record that --progress shows)")
    if args.progress or args.reset:
        extra = [name for name, given in (("card names", args.cards), ("--session", args.session),
                                          ("--random", args.random), ("--mock", args.mock),
                                          ("--seed", args.seed is not None), ("--fixed", args.fixed),
                                          ("--reveal", args.reveal), ("--budget", args.budget is not None)) if given]
        if extra:
            parser.error(f"--{'progress' if args.progress else 'reset'} takes no {', '.join(extra)}")
    if args.reset:
        try:
            deleted = state.reset()
        except OSError as exc:
            parser.exit(1, f"ringlab practice: error: could not delete {state.state_path()}: {exc.strerror or exc}\n")
        print(f"deleted {state.state_path()}" if deleted else f"nothing to delete at {state.state_path()}")
        return 0
    if args.progress:
        return _progress()
    picked = []
    for key in args.cards:
        try:
            cid, note = _card_of(key)
        except ValueError as exc:
            parser.exit(2, f"ringlab practice: error: {exc}\n")
        if note:
            print(f"note: {note}", file=sys.stderr)
        picked.append(cid)
    session = args.session or args.mock or args.random or len(picked) > 1
    if not session:
        for flag, given in (("--seed", args.seed is not None), ("--fixed", args.fixed), ("--budget", args.budget)):
            if given:
                parser.error(f"{flag} applies to a session (--session, --random N or --mock N)")
        if args.reveal and not picked:
            parser.error("--reveal shows the answer of the card named (e.g. 'ringlab practice --reveal 05')")
        return _single(picked[0], args.reveal) if picked else _list()
    if args.reveal:
        how = "--mock" if args.mock else "--random" if args.random else "--session" if args.session else "several cards"
        parser.error(f"--reveal applies to a single card, not to a session ({how})")
    if args.mock and args.random:
        parser.error("give either --mock N or --random N, not both")
    if args.fixed and args.seed is not None:
        parser.error("--fixed keeps the problem set's numbers; it takes no --seed")
    return _session(parser, args, picked)


def _design(parser, args) -> int:
    """``--design``: draw a job, read a layout (``--layout`` or one line typed), print the interviewer's answer."""
    if not args.design:
        parser.error("--layout answers a design prompt: give --design too")
    extra = [name for name, given in (("card names", args.cards), ("--session", args.session), ("--mock", args.mock),
                                      ("--random", args.random), ("--fixed", args.fixed), ("--reveal", args.reveal),
                                      ("--progress", args.progress), ("--reset", args.reset)) if given]
    if extra:
        parser.error(f"--design takes no {', '.join(extra)} (only --seed and --layout)")
    prompt = draw_prompt(args.seed if args.seed is not None else secrets.randbelow(2**31))
    print(wrap(prompt.text()))
    text = args.layout
    while True:
        if text is None:
            try:
                text = _reader()("layout> ")
            except EOFError:
                print()
                return 0
        try:
            feedback = check_design(prompt, text)
        except ValueError as exc:
            if args.layout is not None:
                parser.exit(2, f"ringlab practice: error: --layout: {exc}\n")
            print(wrap(f"  {exc}; try again (Ctrl-D to stop)"))
            text = None
            continue
        print(wrap_lines("\n".join(feedback.lines)))
        return 0


def _reader():
    """``input``; when stdin is not a terminal (a script, a pipe) also echo each line, so the transcript reads
    like a terminal session."""
    if sys.stdin.isatty():
        return input

    def read(prompt: str) -> str:
        line = input(prompt)
        print(line)
        return line

    return read


def _session(parser, args, picked: list[str]) -> int:
    pool = list(dict.fromkeys(picked)) or card_ids()
    count = args.mock or args.random
    seed = None if args.fixed else (args.seed if args.seed is not None else secrets.randbelow(2**31))
    if count:
        if count > len(pool):
            parser.error(f"argument --{'mock' if args.mock else 'random'}: {count} cards asked for, "
                         f"{len(pool)} to choose from")
        pick_rng = np.random.default_rng([seed or 0, 0])
        pool = [str(c) for c in pick_rng.choice(pool, size=count, replace=False)]
    budget = {} if args.budget is None else {"budget_s": args.budget}  # else the Session's default
    Session(pool, seed=seed, mock=bool(args.mock), read=_reader(), **budget).run()
    return 0
