"""Every card's declared slips are named when typed, on the fixed card and across drawn seeds; the right answer
typed in several ways is never mistaken for one; the cards the issue names declare the mistakes their worked
answers describe."""

from __future__ import annotations

import pytest

from ringlab.check.cards import card_ids, is_parametrised, load_card, module
from ringlab.practice.session import check, prepare
from ringlab.practice.units import SCALES

SEEDS = [None, *range(8)]  # None: the fixed card
WITH_ASKS = [c for c in card_ids() if load_card(c).asks]


def _typings(value: float, ask) -> list[str]:
    """``value`` (in the ask's show unit) as a learner types it: in full, to 4 and to 6 figures, in e-notation with
    the show unit, and for sizes in the base unit."""
    show = ask.show if ask.show not in ("", "x") else ""
    value = float(value)
    out = [f"{value!r}", f"{value:.4g} {show}".strip(), f"{value:.6g}", f"{value:.5e} {show}".strip()]
    if ask.unit == "B" and show:
        out.append(f"{value * float(SCALES['B'][show]):.0f} B")
    return out


def _cases():
    for cid in WITH_ASKS:
        for seed in SEEDS if is_parametrised(cid) else [None]:
            yield cid, seed


@pytest.mark.parametrize("cid, seed", list(_cases()))
def test_every_declared_slip_is_named_when_typed(cid, seed):
    card = prepare(cid, seed)
    for slip in card.slips:
        ask = next(a for a in card.asks if a.key == slip.ask)
        for text in _typings(slip.value, ask):
            if slip.value == 0:
                text = "0"
            verdict = check(card, ask, text)
            assert not verdict.correct and verdict.named and slip.says in verdict.mistake, (cid, seed, text, verdict)
            assert slip.says in verdict.feedback and "The answer" not in verdict.feedback  # told before the reveal


@pytest.mark.parametrize("cid, seed", list(_cases()))
def test_the_right_answer_is_never_taken_for_a_slip(cid, seed):
    card = prepare(cid, seed)
    for ask in card.asks:
        for text in _typings(card.expected[ask.key], ask):
            verdict = check(card, ask, text)
            assert verdict.correct, (cid, seed, text, verdict)


def test_declared_slips_apply_to_the_drawn_numbers():
    """Every declared slip applies to some draw (one never told from the answer is a typo or a dead declaration),
    and the cards whose worked answers name mistakes declare them."""
    for cid in WITH_ASKS:
        declared = getattr(module(cid), "SLIPS", ())
        applied = set()
        for seed in SEEDS if is_parametrised(cid) else [None]:
            card = prepare(cid, seed)
            applied |= {i for i, d in enumerate(declared)
                        if any(s.ask == d.ask and s.says == d.says.format_map(card.values) for s in card.slips)}
        assert applied == set(range(len(declared))), (cid, [declared[i] for i in set(range(len(declared))) - applied])
    for cid in ("04", "05", "06", "07", "13", "14", "16", "17", "18"):
        assert len(getattr(module(cid), "SLIPS", ())) >= 2, cid


def test_the_slips_the_issue_measured():
    c17 = load_card("17")
    verdict = check(c17, c17.asks[1], f"{c17.values['wrong_master_gb']:.2f} GB")
    assert "master weights" in verdict.mistake and "KiB" not in verdict.message
    c16 = prepare("16", 1)  # n = 64: a factor of 2 is 1.6 % off, called kB vs KiB before
    assert c16.values["n"] == 64
    verdict = check(c16, c16.asks[1], f"{2 * c16.values['algbw_gbs']:.2f} GB/s")
    assert "a factor of 2 instead of 2(n-1)/n" in verdict.mistake
    c14 = prepare("14", 2)
    verdict = check(c14, c14.asks[2], str((c14.values["requests"] - 1) * c14.values["per_request"]))
    assert "partial block" in verdict.mistake
