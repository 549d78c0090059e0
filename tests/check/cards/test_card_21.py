"""Card 21's numbers against a replay written here, for the fixed card and for drawn ones."""

from collections import OrderedDict

import numpy as np
import pytest

from ringlab.check.cards import draw_params, load_card, module
from ringlab.serving.traces import load_trace, trace_path


def lru_hits(requests, size):
    """Hits of vLLM v1's pool, written out: prefix lookup, fresh blocks (and one partial block) from the LRU
    head, the request's blocks freed last first onto the tail."""
    free, where, what = OrderedDict.fromkeys(range(size)), {}, {}
    hits = 0
    for ids in requests:
        held = []
        while len(held) < len(ids) and ids[len(held)] in where:
            held.append(where[ids[len(held)]])
            free.pop(held[-1])
        hits += len(held)
        for key in [*ids[len(held):], None]:
            block = free.popitem(last=False)[0]
            where.pop(what.pop(block, None), None)
            if key is not None:
                where[key], what[block] = block, key
            held.append(block)
        free.update((block, None) for block in reversed(held))
    return hits


def hand(requests, blocks):
    records = load_trace(trace_path("mooncake-conv"))[:requests]
    full = [r.hash_ids[:r.input_tokens // 512] for r in records]
    seen, ceiling = set(), 0
    for ids in full:  # chained ids: a block hits an infinite cache when its id was listed before
        ceiling += sum(i in seen for i in ids)
        seen.update(ids)
    listed = sum(map(len, full))
    return {"rate": lru_hits(full, blocks) / listed, "ceiling": ceiling / listed, "listed": listed}


def test_the_fixed_card_by_hand():
    v = module("21").values()
    assert v["listed"] == 8_190 and v["longest"] == 235 and v["shared_first"] == 299
    assert v["rate"] == pytest.approx(360 / 8_190) and v["ceiling"] == pytest.approx(675 / 8_190)
    assert hand(300, 3_000) == pytest.approx({"rate": v["rate"], "ceiling": v["ceiling"], "listed": 8_190})
    text = " ".join(load_card("21").text(reveal=True).split())  # as read, whatever the line breaks
    for shown in ("hits 360 of the 8,190 blocks: 4.40%", "675 blocks, 8.24%", "1,536,000 tokens"):
        assert shown in text, shown


@pytest.mark.parametrize("seed", range(3))
def test_drawn_cards_match_the_hand_replay(seed):
    params = draw_params("21", np.random.default_rng(seed))
    v, want = module("21").values(**params), hand(**params)
    assert v["rate"] == pytest.approx(want["rate"]) and v["ceiling"] == pytest.approx(want["ceiling"])
    assert v["rate"] <= v["ceiling"] and v["wrong_tokens"] < v["rate"]
