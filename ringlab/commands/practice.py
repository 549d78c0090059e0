"""``ringlab practice``: interview practice cards, question first, answer on Enter."""

from __future__ import annotations

from ringlab import cli_args
from ringlab.check.cards import card_ids, load_card


def main(argv: list[str]) -> int:
    parser = cli_args.ArgumentParser(prog="ringlab practice", description=__doc__)
    parser.add_argument("card", nargs="?", type=cli_args.text(max_len=64), help="card id, e.g. P2 (omit to list the cards)")
    parser.add_argument("--reveal", action="store_true", help="print the answer without waiting for Enter")
    args = parser.parse_args(argv)
    if not args.card:
        for cid in card_ids():
            print(f"{cid:>4}  {load_card(cid).title}")
        print("\nrun 'ringlab practice P2' to try one")
        return 0
    try:
        card = load_card(args.card)
    except ValueError as exc:
        parser.exit(2, f"ringlab practice: error: {exc}\n")
    print(card.text(reveal=False))
    if not args.reveal:
        print("\n[think it through, then press Enter for the worked answer]", flush=True)
        try:
            input()
        except EOFError:  # no terminal (a pipe, CI): show the answer
            pass
    print("\nANSWER\n" + card.answer + "\n\nFOLLOW-UPS\n" + card.followups)
    return 0
