"""``ringlab verify`` for every (collective, algorithm) pair, and the unchanged ring default."""

import json

import numpy as np
import pytest

from ringlab.collectives import ALGORITHMS
from ringlab.commands.verify import main
from ringlab.sim.verify import verify


@pytest.mark.parametrize("pair", sorted(ALGORITHMS), ids="/".join)
def test_every_pair_passes_on_floats_and_ints(pair):
    collective, algorithm = pair
    for dtype in ("float32", "int16"):
        report = verify([1, 2, 3, 5, 8, 12], numel=37, dtype=dtype, input="random", collective=collective,
                        algorithm=algorithm, root=0)
        assert report.ok, report.table()
        assert report.algorithm == algorithm


def test_direct_all_reduce_reports_expected_disagreement():
    report = verify([3, 7], numel=1001, input="random", collective="all_reduce", algorithm="direct")
    assert report.ok
    assert [r.bit_identical for r in report.rows] == [False, False]  # float sums in different orders
    assert "no (expected)" in report.table()
    assert all(r["identical_expected"] is False for r in report.to_dict()["rows"])


def test_default_is_ring_all_reduce_with_the_original_title(capsys):
    assert main(["--world-sizes", "1-3", "--input", "random", "--numel", "11"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ring all_reduce, op=sum, dtype=float32, input=random\n")
    assert "ALL CHECKS PASSED: 3/3 world sizes" in out


def test_cli_collective_algorithm_and_root(capsys):
    assert main(["--collective", "reduce", "--algorithm", "reduce_scatter_gather", "--root", "1",
                 "--world-sizes", "2-5", "--input", "random", "--numel", "9", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["root"] == 1 and data["algorithm"] == "reduce_scatter_gather"
    assert [r["steps"] for r in data["rows"]] == [n - 1 + int(np.ceil(np.log2(n))) for n in range(2, 6)]


def test_cli_default_algorithm_for_collectives_without_ring(capsys):
    assert main(["--collective", "broadcast", "--world-sizes", "1-4", "--input", "random", "--numel", "5"]) == 0
    assert capsys.readouterr().out.startswith("binomial_tree broadcast, root=0, dtype=float32, input=random\n")


@pytest.mark.parametrize("collective", ["all_gather", "broadcast", "all_to_all"])
def test_collectives_that_combine_nothing_report_no_op(collective, capsys):
    assert main(["--collective", collective, "--world-sizes", "2,3", "--input", "random", "--numel", "7"]) == 0
    title = capsys.readouterr().out.splitlines()[0]
    assert "op=" not in title and title.endswith("dtype=float32, input=random")
    assert verify([2], numel=7, input="random", collective=collective).to_dict()["op"] is None
    assert verify([2], numel=7, input="random", collective="reduce_scatter").to_dict()["op"] == "sum"


@pytest.mark.parametrize("argv, message", [
    (["--collective", "all_reduce", "--algorithm", "rign"], "did you mean ring"),
    (["--collective", "broadcast", "--root", "3", "--world-sizes", "2-4", "--input", "random"], "root must be"),
    (["--collective", "all_gather", "--root", "1", "--input", "random", "--numel", "4"], "root applies"),
    (["--collective", "all_gather", "--op", "max", "--input", "random", "--numel", "4"], "op applies"),
])
def test_cli_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_bytes_mismatch_would_be_reported(monkeypatch):
    # a wrong closed form must make the check fail: swap in a byte function that is off by one byte
    algo = ALGORITHMS[("all_gather", "recursive_doubling")]
    wrong = type(algo)(algo.collective, algo.name, algo.build, lambda *a: algo.bytes_fn(*a) + 1, algo.steps_fn,
                       algo.summary)
    monkeypatch.setitem(ALGORITHMS, ("all_gather", "recursive_doubling"), wrong)
    report = verify([4], numel=8, input="random", collective="all_gather", algorithm="recursive_doubling")
    assert not report.ok and not report.rows[0].bytes_match
