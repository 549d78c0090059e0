"""Practice cards: every card renders completely, the CLI shows them, and the numbers on the cards
equal figures worked out by hand from the original problem set's inputs (typed here as literals, never read
from the code)."""

from __future__ import annotations

import io
import re
import string
import subprocess
import sys
from importlib import resources

import pytest

from ringlab.check.cards import SECTIONS, card_ids, load_card, module, resolve
from ringlab.commands import practice

ALL_IDS = [f"{i:02d}" for i in range(1, 22)]  # one card per topic of ringlab/course/registry.py
# the old problem-set ids, mapped by hand from the table of the old problem set (P15 never existed)
OLD = {"P1": "01", "P12": "02", "P9": "03", "P2": "04", "P5": "05", "P3": "06", "P8": "07", "P10": "08",
       "P4": "09", "P6": "10", "P7": "11", "P11": "12", "P13": "14", "P14": "15", "P16": "16"}


@pytest.fixture(scope="module")
def cards():
    return {cid: load_card(cid) for cid in ALL_IDS}


def _source(cid: str) -> str:
    return resources.files("ringlab.check").joinpath("cards", f"{cid}.md").read_text(encoding="utf-8")


def test_one_card_per_topic_in_number_order():
    assert card_ids() == ALL_IDS
    for cid in ALL_IDS:
        assert callable(module(cid).values), cid


@pytest.mark.parametrize("old", sorted(OLD))
def test_old_ids_are_aliases_that_name_the_new_id(old):
    for spelling in (old, old.lower(), f"P{int(old[1:]):02d}"):
        new, note = resolve(spelling)
        assert new == OLD[old] and f"is now {OLD[old]}" in note
    assert load_card(old).id == OLD[old]


@pytest.mark.parametrize("cid", ALL_IDS)
def test_card_renders_without_leftover_fields(cards, cid):
    card = cards[cid]
    text = card.text(reveal=True)
    assert "{" not in text and "}" not in text, f"{cid} has an unfilled or stray brace"
    assert "**" not in _source(cid), f"{cid}: Markdown bold shows as asterisks in a terminal"
    for section in SECTIONS:
        assert f"## {section}" in _source(cid)
    assert len(card.question) > 150 and "?" in card.question
    assert len(card.answer) > 600
    assert len(card.followups) > 300


@pytest.mark.parametrize("cid", ALL_IDS)
def test_values_and_fields_match(cid):
    """Every field the text uses is computed, and every computed value is used (no dead values): by the text,
    or as a named slip's value or in its sentence."""
    def fields(text: str) -> set:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name}

    used = fields(_source(cid))
    slips = getattr(module(cid), "SLIPS", ())
    by_slips = {s.value for s in slips} | {f for s in slips for f in fields(s.says)}
    assert used | by_slips == set(module(cid).values())


@pytest.mark.parametrize("cid", ALL_IDS)
def test_followups_come_with_answers(cards, cid):
    items = [i for i in re.split(r"^- ", cards[cid].followups, flags=re.M) if i.strip()]
    assert len(items) >= 3, f"{cid} has {len(items)} follow-ups"
    for item in items:
        question, mark, answer = item.partition("?")
        assert mark and len(answer.split()) >= 8, f"{cid}: follow-up without a worked answer: {item[:60]!r}"


# Figures derived by hand from the problem set's inputs (the derivation is in each comment).
EXPECTED = {
    "04": [
        "27,562,500,000",  # 2 x 63/64 x 14e9
        "41,343,750,000",  # 3 x 63/64 x 14e9
        "13,781,250,000",  # one all-gather: 63/64 x 14e9
        "1.5x DDP",
        "13.04 GiB",  # 14e9 / 2**30
        "112.0 GB",  # 7e9 x (2 + 2 + 12) B
        "1.75 GB",  # 112 GB / 64
        "45.94 GB/s",  # 14e9 / 0.6 s x 126/64
        "11% of it",  # 45.94 / (8 NICs x 50 GB/s)
        "DDP 69.5 ms",  # 2 x 63/64 x 14e9 / 400e9 + 126 x 5 us
        "FULL_SHARD 104.3 ms",  # 3 x 63/64 x 14e9 / 400e9 + 189 x 5 us
        "HYBRID_SHARD 143.0 ms",  # 3 x (7/8 x 14e9 / 450e9 + 7 x 2 us) + 2 x 7/8 x 1.75e9 / 50e9 + 14 x 5 us
        "0.552 s",  # the single-NIC picture: 126 x 5 us + 27.5625e9 / 50e9
    ],
    "06": [
        "64 FLOP/B",  # 512e9 / 8e9
        "153 FLOP/B",  # 312e12 / 2.039e12 = 153.0
        "3.92 ms",  # 8e9 / 2.039e12
        "1.64 ms",  # 512e9 / 312e12
        "4.0 ms",  # 8e9 / 2e12
        "5.14 ms",  # 8e9 / 1.555e12
        "989 TFLOP/s dense",
        "295 -> 591",  # 989e12 / 3.35e12, 1979e12 / 3.35e12
        "2,147,483,648 B",  # 4 tensors x 2**28 x 2 B
        "1,073,741,824 B",  # 2 tensors x 2**28 x 2 B
        "3.2 TFLOP on 8 GB (400 FLOP/B)",  # the sparse-peak trap's kernel: 400 x 8e9 FLOPs
        "compute-bound at 3.24 ms",  # 3.2e12 / 989e12 > 8e9 / 3.35e12 = 2.39 ms
    ],
    "09": ["17,280 ticks", "138,240 rows"],  # 86400 / 5, x 8 GPUs
    "05": [
        "327,680 B",  # 2 x 80 x 8 x 128 x 2
        "42,949,672,960 B",  # x 4096 x 32
        "42.95 GB",
        "40.00 GiB",  # 42,949,672,960 / 2**30
        "343,597,383,680 B",  # with 64 heads: 8x
        "40,960 B per token",  # MQA: 2 x 80 x 1 x 128 x 2
        "70,272 B per token",  # DeepSeek-V3: 61 x (512 + 64) x 2
        "0.5 GiB",  # Mistral window: 32 x 4096 x 2 x 8 x 128 x 2 / 2**30
        "4,112 token slots",  # 4097 rounded up to 16
        "344,064 B per token",  # Gemma-2-9B: 42 x 8 x (256 + 256) x 2
        "172,032 B per extra token",  # its 21 global layers
        "5.91 GiB",  # (21 x 32768 + 21 x 4096) x 8192 B / 2**30
        "10.50 GiB",  # 344,064 x 32768 / 2**30
        "1.31 GiB",  # 344,064 x 4096 / 2**30
        "10 of its 118 layers",  # Nemotron-H-56B (arXiv:2504.03624, Table 1)
        "8.5% of the 483,328 B",  # 10 x 8 x 256 x 2 = 40,960 of 118 x 4,096
    ],
    "10": ["264 B per rank", "39,321,600 B",  # 3 x 88; 2 x 3/4 x 25 MiB
           # the majority is the reference, as the 10a grader requires (comparing with rank 0 blames the healthy)
           "the value most ranks hold is the reference", "Comparing everyone with rank 0"],
    "11": ["220.5 GB vs 27.56 GB", "96.5 GB saved", "14.0 GB",  # 8 x 27.5625; 7 x 13.78125; 7e9 x 2
           # after a forward inside no_sync DDP skips the next buffer broadcast (torch DDP: require_forward_param_sync)
           "require_forward_param_sync", "SyncBatchNorm: its statistics are all-reduced in"],
    "07": [
        "4.64 ms",  # (7,504,924,672 x 2 + 536,870,912) / 3.35e12
        "0.537 GB per sequence",  # 2 x 32 x 8 x 128 x 2 x 4096
        "0.160 ms",  # 536,870,912 / 3.35e12
        "297 ms",  # naive: 64 x 4.6408 ms
        "memory allows B = 104",  # (72e9 - 16,060,522,496) // 536,870,912
        "B = 96 (bound by latency)",  # (15,009,849,344 + 96 x 536,870,912) / 3.35e12 = 19.87 ms; 97 -> 20.03
        "19.87 ms",
        "6,240",  # 3.35e12 / 536,870,912
    ],
    "03": ["1,111 on every rank", "1,001, 11, 110, 1,100", "3,145,728 B"],  # 3/4 x 4 MiB
    "08": [
        "0.4375",  # 7/16
        "7/23 = 0.304",
        "69 slots",  # (16 + 7) x 3 slots
        "21 idle",  # 7 x 3
        "0.21875",  # 7/32
        "0.1458",  # 7/48
        "0.1094",  # 7/64
    ],
    "12": [
        "234,881,024 FLOPs",  # 7 x 8192 x 4096
        "134,234,112 B",  # (2 x 8192 x 4096 + 2 x 4096) x 2
        "3,192 lanes",  # 8192 - 5000
        "5 iterations",
        "904 real columns and 120 masked",
        "16,384 B of loads per row",  # 2 x 4096 x 2
        "805,322,752 B",  # 134,234,112 + 10 more passes of 8192 x 4096 x 2 B (12 eager passes vs 2 fused)
        "6.0x faster",  # 805,322,752 / 134,234,112, both memory-bound
    ],
    "02": [
        "= 1.750 M",  # 2 x 7/8
        "= 0.875 M",  # 7/8
        "= 3 M",  # binomial root: ceil(log2 8)
        "126 steps",  # 2 x 63
    ],
    "13": [
        "18x",  # 900 / 50
        "9x",  # 450 / 50
        "400/8 = 50 GB/s",
        "5.0 ms at line rate against 4.2 ms",  # 2 x 15/16 x 2**30 / 400e9; 2 x 7/8 x 2**30 / 450e9
        "(1.2x;",
        "40.4 ms, 9.6x",  # 30 x 5 us + 2 x 15/16 x 2**30 / 50e9, over 14 x 2 us + 4.18 ms
    ],
    "14": [
        "524,288 B",  # 2 x 32 layers x 32 KV heads x 128 x 2 B
        "8,388,608 B (8 MiB)",  # x 16 tokens
        "7,680 blocks = 122,880 tokens",  # 60 x 2**30 / 2**23; x 16
        "62 full blocks (992 tokens)",  # 1000 // 16
        "162 blocks instead of 100 x 63",  # 62 + 100 partial blocks
        "6,138 blocks saved (47.95 GiB)",  # 99 x 62; x 8 MiB / 2**30
        "3 copies",  # n = 4 sharers of the partial block: n - 1 copy
        "66 blocks in use",  # 63 + 3
        "126 blocks instead of 64",  # 2 x 63 without same-step sharing; 62 + 2 partial with it
    ],
    "15": [
        "32 blocks and exactly 32 are free",  # 512 / 16 of a 64-block pool
        "a cycle of period 1.",
        "268,435,456 B",  # 32 blocks x 8 MiB
        "8.4 ms in all",  # 2 x 2**28 B / 64e9 B/s: out and back in over PCIe Gen5 x16
        "16.8 ms against",  # the A100's PCIe Gen4: 2 x 2**28 B / 32e9 B/s
        "1.2 ms against",  # GH200's NVLink-C2C: 2 x 2**28 B / 450e9 B/s
        "takes 10 steps",  # ceil(5000 / 512)
    ],
    "16": [
        "= 102.26 GB/s",  # 8 x 2**30 B / 0.084 s = 102,261,126,095 B/s
        "2(n-1)/n = 1.875",  # 2 x 15 / 16
        "busbw = 191.74 GB/s",  # 102.2611 x 1.875
        "(n-1)/n = 0.9375",  # 15 / 16
        "8 x 50 GB/s = 400 GB/s",  # 400 Gb/s NDR / 8 bits
        "at 48% of it",  # 191.74 / 400
        "halves to 200 GB/s",  # 4 x 50
        "at 96% of that",  # 191.74 / 200
        "12.5 GB/s per node",  # 100 Gb/s / 8
        "32x below",  # 400 / 12.5
        # NCCL 2.30, Tree/LL128 on 2 x 8 H100 (8 channels of 45 GB/s): latency 14 + 2 (7 x 1.25 + 8.5) = 48.5 us;
        # bandwidth min(8 x 45 x .92, 8 x 41.4) x 120/128 capped at 8 x 36.7 = 293.6, halved, x 0.6 at 1 MiB (tree
        # correction) = 88.08 GB/s; 48.5 + 1,048,576 / 88,080 = 60.40 us
        "picks TREE/LL128 on 16 channels: 48.5 us of",
        "at 88.08 GB/s = 60.4 us",
    ],
    "17": [  # GPT-3 175B (h 12,288, 96 layers, vocab 51,200, 2,048 positions), TP 8 x PP 16 x DP 8, stage 0
        "1,463,270,400 parameters",  # 6 x (12h^2/8 + 7h/8 + 6h) + 51,200/8 x h + 2,048 x h
        "weights 2.93 GB, gradients 2.93 GB",  # 2 B each, gradients unsharded under ZeRO-1
        "optimizer 2.19 GB; model states 8.05 GB",  # 12 B x n / 8
        "107.0 MB here",  # 34 x 2,048 x 12,288 / 8
        "(50.3 MB): 10.32 GB",  # 2,048 x 12,288 x 16 in flight / 8; + 96 x 106,954,752
        "Total: 18.37 GB",
        "352.3 MB",  # 4 x 2 x 7/8 x 2,048 x 12,288 x 2 B
        "sends 440.4 MB",  # 10 ring collectives x 7/8 x 50,331,648 B
        "gradients, 15.81 GB",  # 18.366 - 2.927 + 2.927 / 8
        "8 B of optimizer state), 17.63 GB",  # 18.366 - 2.195 + 8 x 1.463e9 / 8
        "16, 8.69 GB",  # 8.048 + 6 x 106.95 MB + 50.3 MB / 16
        "327.2 MB per layer,\n3.1x more), 39.86 GB",  # s b h (10 + 24/8); 13 / 4.25; + 96 x 327.2 MB + 402.7 MB of masks
        "once per layer, 88.1 MB",  # 2 x 7/8 x 50,331,648
        "sends\n  234.9 MB per layer and micro-batch; counting one all-to-all gives 58.7 MB",  # 4096 x 2 x 4096 x 2 B x 7/8
        "8,192 H100s",  # 64 x 8 x 16
    ],
    "18": [  # 8 buckets of 2 ms backward; all-reduce 1.5 ms, then 3 ms
        "At 1.5 ms per all-reduce: 1.50 ms",  # the last bucket only
        "all-reduce: 17.50 ms",  # 16 + 1.5
        "= 3 + 7 x 1.0 = 10.00 ms",
        "Backward plus the tail: 26.00 ms",  # 16 + 10
        "8 x 3 = 24.0 ms",
        "8.0 ms, forgets",  # 8 x (3 - 2)
        "(1.905 ms per layer's all-reduce)",  # 2 x 7/8 x 52,428,800 / 50e9 + 14 x 5 us
        "sends 0.734 GB per rank",  # 8 x 2 x 7/8 x 50 MiB
        "step 38.75 ms,\n  14.75 ms exposed",  # 24 ms of compute + the 400 MiB all-reduce: 14.68 + 0.07 ms
        "(1.101 GB:",  # 1.5 x 0.734
        "step 26.86 ms, 2.86 ms exposed",  # 3 exposed collectives of 7/8 x 50 MiB / 50e9 + 7 x 5 us = 0.9525 ms
        "25.91 ms (1.91 ms exposed)",  # 24 + 1.905
        "40.19 ms with 16.19 ms exposed",  # 16 gathers + the last reduce-scatter exposed: 17 x 0.9525 + 24
        "2 x 63 = 126 steps of alpha, 0.63 ms",  # 126 x 5 us
        "5.072 ms of TP all-reduce is exposed, 100% of",  # 32 x (2 x 7/8 x 2**25 / 450e9 + 14 x 2 us)
        "16.1 GB of bf16 gradients",  # 8,030,261,248 parameters x 2 B
        "with 34 buckets",  # embedding, 32 layers and the LM head, each over the 25 MiB cap
    ],
}


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_card_numbers_match_hand_derivation(cards, cid):
    text = cards[cid].text(reveal=True)
    missing = [s for s in EXPECTED[cid] if s not in text]
    assert not missing, f"{cid} lacks {missing}"


def test_list_shows_every_card(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # the listing reads the practice record
    assert practice.main([]) == 0
    out = capsys.readouterr().out
    for cid in ALL_IDS:
        assert re.search(rf"^\s*{cid}\*?\s+\S", out, flags=re.M), cid
    assert "Pipeline bubble" in out


def test_reveal_prints_question_and_answer(capsys):
    assert practice.main(["P2", "--reveal"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "card P2 is now 04" in captured.err
    assert out.index("QUESTION") < out.index("ANSWER") < out.index("FOLLOW-UPS")
    assert "41,343,750,000" in out and "press Enter" not in out


def test_waits_for_enter_then_answers(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))
    assert practice.main(["p2"]) == 0
    out = capsys.readouterr().out
    assert out.index("press Enter") < out.index("ANSWER")


def test_closed_stdin_prints_the_answer():
    proc = subprocess.run([sys.executable, "-m", "ringlab", "practice", "P2"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "ANSWER" in proc.stdout and "27,562,500,000" in proc.stdout


@pytest.mark.parametrize("bad", ["P15", "P0", "X2", "2.5", "99", "0"])
def test_unknown_card_is_a_clear_error(capsys, bad):
    with pytest.raises(SystemExit) as exc:
        practice.main([bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"unknown card {bad!r}" in err and "01, 02" in err and "18" in err


@pytest.mark.parametrize("cid", ALL_IDS)
def test_hints_and_rubric(cards, cid):
    """Graded hints (nudge first, method last) and a rubric whose auto-marked items are the card's asks."""
    from ringlab.check.cards import split_rubric

    card = cards[cid]
    assert len(card.hints) >= 3 and len(card.rubric) >= 3, cid
    assert len(set(card.hints)) == len(card.hints)
    auto = [split_rubric(item)[0] for item in card.rubric if split_rubric(item)[0]]
    assert sorted(auto) == sorted(a.key for a in card.asks), cid
    for ask in card.asks:
        assert ask.key in module(cid).values(), (cid, ask.key)


def test_hints_tagged_with_an_ask_are_offered_at_that_ask_only(cards):
    card = cards["14"]  # three asks; the third (blocks saved) used to get the hint about block bytes
    assert card.hints_for("hits")[0].startswith("Prefix sharing hashes")
    assert not any("bytes per token" in h for h in card.hints_for("hits"))
    assert card.hints_for("block_bytes")[0].startswith("A block holds block_size tokens")
    assert card.hints_for(None) == card.hints and all("[" not in h[:1] for h in card.hints)
    for cid in ALL_IDS:
        for ask in cards[cid].asks:
            assert cards[cid].hints_for(ask.key), (cid, ask.key)  # every number asked has a hint


def test_a_hint_tag_or_slip_without_an_ask_is_refused(monkeypatch):
    from ringlab.check import cards as pkg

    mod = module("14")
    monkeypatch.setattr(mod, "ASKS", mod.ASKS[:2])
    with pytest.raises(ValueError, match=r"hints tagged \['hits'\]"):
        pkg.load_card("14")
    monkeypatch.undo()
    monkeypatch.setattr(mod, "SLIPS", (pkg.Slip("blocks", "no_such_value", "x"),))
    with pytest.raises(ValueError, match="must be a key of values"):
        pkg.load_card("14")


def test_a_rubric_key_without_an_ask_is_refused(monkeypatch):
    from ringlab.check import cards as pkg

    mod = module("08")
    monkeypatch.setattr(mod, "ASKS", mod.ASKS[:1])
    with pytest.raises(ValueError, match=r"rubric items marked by \['total'\]"):
        pkg.load_card("08")


@pytest.mark.parametrize("cid", ALL_IDS)
def test_asks_name_units_the_answer_parser_knows(cards, cid):
    from ringlab.practice.units import SCALES

    for ask in cards[cid].asks:
        assert ask.show == "" or ask.show in SCALES[ask.unit], (cid, ask)
        if ask.world_size:
            assert ask.world_size in cards[cid].values, (cid, ask)
