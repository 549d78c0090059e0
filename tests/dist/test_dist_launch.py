"""The launcher: results by rank, errors naming the rank, and no hang past the timeout."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from ringlab.dist import LaunchTimeout, RankError, launch  # noqa: E402

pytestmark = pytest.mark.slow  # each test launches ranks as processes (torchrun included): seconds each


def _whoami(tag):
    return tag, dist.get_rank(), dist.get_world_size(), os.environ["RANK"], os.environ["WORLD_SIZE"]


def _raise_on_rank_one():
    if dist.get_rank() == 1:
        raise ValueError("boom from the test")
    dist.barrier()  # rank 0 waits here for a rank that is gone; the launcher must not wait for it


def _deadlock():
    """Both ranks receive first: the classic ring deadlock that batch_isend_irecv avoids."""
    buf = torch.empty(4)
    dist.recv(buf, src=1 - dist.get_rank())


def test_results_come_back_in_rank_order_with_torchrun_variables():
    assert launch(_whoami, 1, args=("a",), timeout=60) == [("a", 0, 1, "0", "1")]
    assert launch(_whoami, 2, kwargs={"tag": "b"}, timeout=60) == [("b", 0, 2, "0", "2"), ("b", 1, 2, "1", "2")]


def test_an_exception_names_its_rank_and_carries_its_traceback():
    start = time.monotonic()
    with pytest.raises(RankError) as info:
        launch(_raise_on_rank_one, 2, timeout=900)
    err = info.value
    assert err.rank == 1 and err.exc_type == "ValueError" and "boom from the test" in err.message
    assert "rank 1" in str(err) and "_raise_on_rank_one" in err.remote_traceback
    assert time.monotonic() - start < 450  # reported at once, not at the timeout (generous: a busy machine)


def test_a_hanging_group_is_killed_at_the_timeout():
    start = time.monotonic()
    with pytest.raises(LaunchTimeout) as info:
        launch(_deadlock, 2, timeout=12)
    assert isinstance(info.value, TimeoutError) and info.value.ranks == [0, 1]
    assert time.monotonic() - start < 12 + 120  # the timeout plus killing and joining, not a hang


def test_bad_arguments_are_refused_before_any_process_starts():
    with pytest.raises(TypeError, match="module-level"):
        launch(lambda: 0, 2)
    with pytest.raises(ValueError, match="world_size"):
        launch(_whoami, 0)
    with pytest.raises(ValueError, match="backend"):
        launch(_whoami, 2, backend="mpi")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            launch(_whoami, 2, backend="nccl")


def test_ring_all_reduce_runs_unchanged_under_torchrun(tmp_path):
    script = Path(__file__).with_name("torchrun_ring.py")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          str(script)], capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-3000:]
    # 9 float32 over 2 ranks, chunks of 5 and 4: each rank sends 4 * (2 * 9 - 5 - 4) = 36 bytes
    assert sorted(re.findall(r"rank \d \w+ \d+ \d+", out.stdout)) == ["rank 0 ok 36 36", "rank 1 ok 36 36"]
