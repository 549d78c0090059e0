"""grad_comm_bytes against the values the branch-per-strategy version gave, for every strategy on a grid.

``fixtures/grad_comm_previous.json`` was written by the version of ``ringlab/calc/comm.py`` at commit
da216cb (one ``if`` branch per strategy), before the strategy table replaced the branches; each entry
is ``case key -> [bytes_sent_per_rank, breakdown rows, memory (params, grads, optimizer), notes]``,
the notes as indices into the fixture's list of note texts.
"""

import itertools
import json
from pathlib import Path

import pytest

from ringlab.calc import STRATEGIES, grad_comm_bytes

FIXTURE = Path(__file__).parent / "fixtures" / "grad_comm_previous.json"
SHARDED_PARAMS = ("fsdp_full_shard", "zero3", "hybrid_shard")  # the ones reshard_after_forward applies to
FSDP = ("fsdp_shard_grad_op", "fsdp_full_shard", "zero3", "hybrid_shard")


def grid():
    """Every accepted combination of the flags over sizes that divide evenly and that do not."""
    for strategy, n_params, world_size, k, no_sync in itertools.product(
            STRATEGIES, (1001, 7 * 10**9), (1, 3, 8), (1, 4), (True, False)):
        nodes = [g for g in (1, 2, 8) if world_size % g == 0] if strategy == "hybrid_shard" else [None]
        reshards = (None, True, False) if strategy in SHARDED_PARAMS else (None,)
        apis = [("fsdp1", None)] + ([("fsdp2", v) for v in (None, True, False)] if strategy in FSDP else [])
        for g, reshard, (api, after_backward) in itertools.product(nodes, reshards, apis):
            yield dict(strategy=strategy, n_params=n_params, world_size=world_size,
                       gpus_per_node=g, grad_accum_steps=k, reshard_after_forward=reshard, no_sync=no_sync,
                       fsdp_api=api, reshard_after_backward=after_backward)


def key(case: dict) -> str:
    return " ".join(map(str, case.values()))


def observed(case: dict, notes: list) -> list:
    r = grad_comm_bytes(**case)
    rows = [[c.collective, c.phase, c.group, c.group_size, c.count, c.message_bytes, c.bytes_sent, c.ring_steps]
            for c in r.breakdown]
    m = r.memory
    return [r.bytes_sent_per_rank, rows, [m.params, m.grads, m.optimizer_states],
            [notes.index(n) if n in notes else n for n in r.notes]]


@pytest.fixture(scope="module")
def previous() -> dict:
    return json.loads(FIXTURE.read_text())


def test_grid_matches_previous_values(previous):
    cases = list(grid())
    assert len(cases) == len(previous["cases"]) > 1000  # the fixture holds this grid, no more, no less
    wrong = [key(c) for c in cases if observed(c, previous["notes"]) != previous["cases"][key(c)]]
    assert not wrong, f"{len(wrong)} cases changed, first: {wrong[0]}"
