"""The figure of NCCL's choice map and of what forcing a protocol or algorithm costs."""

import numpy as np

from ringlab.nccl.tuning import choose, comm_for_cluster, tune
from ringlab.topology import get_cluster
from ringlab.viz.nccl_tuning import choice_map, forcing_cost, plot_choice_map

SIZES = (1 << 10, 1 << 20, 1 << 30)


def test_choice_map_labels_match_choose():
    labels, grid = choice_map(sizes=SIZES, nodes=(1, 2))
    assert grid.shape == (2, 3)
    table = tune(comm_for_cluster(get_cluster("dgx-h100", 2), "2.30").comm, "2.30")
    assert [labels[k] for k in grid[1]] == [choose(table, "all_reduce", s).label for s in SIZES]


def test_forcing_never_beats_nccl_own_choice():
    cost = forcing_cost(sizes=SIZES)
    assert set(cost) == {"NCCL_PROTO=Simple", "NCCL_PROTO=LL", "NCCL_ALGO=Ring", "NCCL_ALGO=Tree"}
    for ratio in cost.values():
        assert np.all(ratio >= 1.0)
    assert cost["NCCL_PROTO=LL"][-1] > 4  # LL's half bandwidth at 1 GiB
    assert cost["NCCL_PROTO=Simple"][0] > 1.5  # Simple's latency at 1 KiB


def test_plot_has_two_panels():
    from ringlab.viz._mpl import pyplot

    fig = plot_choice_map(sizes=SIZES, nodes=(1, 2))
    assert len(fig.axes) == 2 and "choice" in fig.axes[0].get_title()
    pyplot().close(fig)
