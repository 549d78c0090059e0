"""``ringlab bench``: the nccl-tests bandwidth formulas, the size grid, and one small real run through the CLI."""

import csv

import pytest

from ringlab.cli import main
from ringlab.collectives.registry import check_collective
from ringlab.dist.bench import COLLECTIVES, BenchRow, bus_factor, message_sizes, run_bench

pytestmark = pytest.mark.slow  # each test launches ranks as processes: seconds each

pytest.importorskip("torch")


@pytest.mark.parametrize("collective, n, factor", [
    ("all_reduce", 1, 0.0), ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75),
    ("all_gather", 4, 0.75), ("reduce_scatter", 2, 0.5), ("reduce_scatter", 8, 0.875),
])
def test_bus_factor_matches_nccl_tests(collective, n, factor):
    assert bus_factor(collective, n) == factor


def test_bad_collective_is_refused():
    with pytest.raises(ValueError, match="all_reduce, all_gather, reduce_scatter"):
        check_collective("broadcast", COLLECTIVES)
    with pytest.raises(ValueError, match="collective must be one of"):
        run_bench("broadcast")  # refused before any process starts


def test_sizes_double_from_min_to_max():
    assert message_sizes(8, 64) == [8, 16, 32, 64]
    assert message_sizes(8, 100) == [8, 16, 32, 64]
    assert len(message_sizes(8, 256 * 2**20)) == 26  # 2**3 .. 2**28
    with pytest.raises(ValueError):
        message_sizes(64, 8)


def test_row_bandwidths_by_hand():
    # 1e9 bytes in 0.5 s: algbw 2 GB/s; all-reduce over 4 ranks: busbw 2 * 2 * 3 / 4 = 3 GB/s
    row = BenchRow("all_reduce", 4, "gloo", "float32", 10**9, 250_000_000, 500_000.0, 1_000_000.0)
    assert row.algbw(row.library_time_us) == pytest.approx(2.0)
    assert row.busbw(row.library_time_us) == pytest.approx(3.0)
    assert row.busbw(row.ringlab_time_us) == pytest.approx(1.5)
    assert row.time_ratio == 2.0


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter"])
def test_cli_runs_in_real_processes_and_writes_csv(tmp_path, capsys, collective):
    path = tmp_path / "bench.csv"
    rc = main(["bench", "--collective", collective, "--world-size", "2", "--min-bytes", "8", "--max-bytes", "1KiB",
               "--iters", "2", "--warmup", "1", "--timeout", "60", "--csv", str(path)])
    assert rc == 0
    table = capsys.readouterr().out
    assert f"# ringlab bench: {collective}, world_size=2, backend=gloo" in table
    assert table.count(f"# Collective test starting: {collective}") == 2  # torch.distributed, then ringlab
    rows = list(csv.DictReader(path.open()))
    assert [int(r["size_bytes"]) for r in rows] == [8, 16, 32, 64, 128, 256, 512, 1024]
    for r in rows:
        t_lib, t_ring = float(r["library_time_us"]), float(r["ringlab_time_us"])
        assert t_lib > 0 and t_ring > 0
        assert float(r["time_ratio"]) == pytest.approx(t_ring / t_lib)
        factor = 1.0 if collective == "all_reduce" else 0.5
        assert float(r["ringlab_busbw_GBps"]) == pytest.approx(int(r["size_bytes"]) / t_ring / 1e3 * factor)


def test_cli_refuses_bad_sizes(capsys):
    assert main(["bench", "--min-bytes", "1MiB", "--max-bytes", "8"]) == 2
    assert "min_bytes" in capsys.readouterr().err
