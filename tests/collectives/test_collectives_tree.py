"""NCCL's double binary tree and the binomial trees, checked against the pictures they come from."""

import numpy as np
import pytest

from ringlab.collectives import ALGORITHMS, double_binary_tree_all_reduce_schedule, double_binary_tree_parents, get_schedule
from ringlab.collectives.tree import double_binary_tree_steps
from ringlab.sim.runner import run_collective


def test_trees_match_nccl_illustrations():
    # NCCL src/graph/trees.cc draws 12 ranks (mirror) and 13 ranks (shift); parents read off those drawings
    t0, t1 = (t.tolist() for t in double_binary_tree_parents(12))
    assert t0 == [-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 8, 10]
    assert t1 == [1, 3, 1, 11, 5, 7, 5, 3, 9, 7, 9, -1]
    t0, t1 = (t.tolist() for t in double_binary_tree_parents(13))
    assert t0[12] == 8 and t0[8] == 0
    assert t1[1] == -1 and t1[9] == 1 and t1[0] == 9 and t1[11] == 0 and t1[12] == 11


@pytest.mark.parametrize("n", range(2, 65))
def test_no_rank_is_an_inner_node_of_both_trees(n):
    t0, t1 = double_binary_tree_parents(n)
    inner0 = {p for p in t0 if p >= 0}
    inner1 = {p for p in t1 if p >= 0}
    # each rank forwards in at most one tree (the point of two trees); for odd N the shift makes
    # rank 0 (root of tree 0) the parent of rank N - 1's image in tree 1 as well
    assert inner0 & inner1 == (set() if n % 2 == 0 else {0})
    for parents in (t0, t1):
        assert sorted(parents).count(-1) == 1
        assert all(np.bincount([p for p in parents if p >= 0], minlength=n) <= 2)  # binary


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("n", [1, 2, 3, 8, 13, 24])
def test_pipelining_changes_steps_not_bytes_or_result(n, k):
    x = np.random.default_rng(n).integers(-9, 9, size=(n, 101))
    sched = double_binary_tree_all_reduce_schedule(n, pipeline_chunks=k)
    assert sched.num_steps == double_binary_tree_steps(n, k)
    from ringlab.sim import run_schedule

    res = run_schedule(sched, x)
    assert (res.outputs == x.sum(axis=0)).all()
    assert res.traffic.bytes_sent.tolist() == ALGORITHMS[("all_reduce", "double_binary_tree")].bytes_sent(
        n, 101, 8).tolist()
    if n > 1:
        assert sched.num_steps == double_binary_tree_steps(n, 1) + k - 1


def test_double_binary_tree_busiest_rank_sends_twice_the_message():
    # inner node of one tree (up M/2, down 2 x M/2) and leaf of the other (up M/2): 2M
    sent = ALGORITHMS[("all_reduce", "double_binary_tree")].bytes_sent(16, 64, 1)
    assert sent.max() == 128 and sent.min() == 32 + 32  # a root of one tree with one child, leaf of the other


def test_pipeline_chunks_must_be_positive():
    with pytest.raises(ValueError, match="pipeline_chunks"):
        double_binary_tree_all_reduce_schedule(4, pipeline_chunks=0)


def test_binomial_broadcast_follows_mpich_order():
    steps = get_schedule("broadcast", "binomial_tree", 6, root=0).steps
    # mask 4 first: 0 -> 4; then mask 2: 0 -> 2, 4 -> 6 (absent); then mask 1: 0->1, 2->3, 4->5
    assert [[(t.src, t.dst) for t in s] for s in steps] == [[(0, 4)], [(0, 2)], [(0, 1), (2, 3), (4, 5)]]
    rooted = get_schedule("broadcast", "binomial_tree", 6, root=4).steps
    assert [(t.src, t.dst) for t in rooted[0]] == [(4, 2)]  # relative ranks shifted by the root


def test_binomial_broadcast_root_sends_ceil_log2_messages():
    for n in (2, 5, 8, 33):
        sent = ALGORITHMS[("broadcast", "binomial_tree")].bytes_sent(n, 10, 1, 0)
        assert sent[0] == 10 * int(np.ceil(np.log2(n)))
        assert sent.sum() == 10 * (n - 1)  # every other rank receives the message once


def test_scatter_allgather_broadcast_with_nonzero_root():
    x = np.zeros((7, 20), dtype=np.int16)
    x[5] = np.arange(20)
    res = run_collective("broadcast", "scatter_allgather", x, root=5)
    assert (res.outputs == np.arange(20)).all()
