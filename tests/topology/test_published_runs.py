"""The line-rate ceiling against published nccl-tests results: above every one, and by how much."""

import pytest

from ringlab.topology.published import PUBLISHED, ceiling_for, compare

# NVLS is the loosest: the model lets every NVLink port carry M (1 + 1/N) each way, the H100 switch sustains
# 63-69% of that (nccl-tests#212, #290, #309); ring runs sit at 82-99% of line rate.
RING_FLOOR, NVLS_FLOOR = 0.8, 0.55


@pytest.mark.parametrize("run", PUBLISHED, ids=lambda r: f"{r.source.rsplit('/', 3)[-3]}#{r.source.rsplit('/', 1)[-1]}")
def test_ceiling_bounds_each_published_run_from_above_and_not_by_much(run):
    name, ceiling = ceiling_for(run)
    assert run.measured <= ceiling, f"{run.what}: measured {run.measured} GB/s above the model's {ceiling:.1f}"
    floor = NVLS_FLOOR if name.startswith("nvls") else RING_FLOOR
    assert run.measured >= floor * ceiling, f"{run.what}: {run.measured / ceiling:.2f} of the {ceiling:.1f} GB/s ceiling"


def test_two_node_ring_ceiling_is_the_rails_and_tree_runs_beat_it():
    rows = {r["what"]: r for r in compare()}
    ring = next(r for w, r in rows.items() if "396GB/s" in w)
    assert ring["ceiling_GBps"] == pytest.approx(400.0)  # 8 x 400 Gb/s = 8 x 50 GB/s
    nvls_tree = next(r for w, r in rows.items() if "NVLSTree" in w)
    assert nvls_tree["measured_GBps"] > ring["ceiling_GBps"] and nvls_tree["ratio"] < 1
