"""The nccl-tests table across layouts: columns, N/A, %g counts, in-place only, per-iteration and timestamp columns."""

import pytest

from ringlab.nccl import read_texts
from ringlab.nccl.table import RowError, columns_of, parse_row

from nccl_fixtures import fixture_text

MODERN = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
OLD = "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error"
OLD_BCAST = "#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error"
# src/util.cu writeResultHeader with per_iter_timing (-I 1): each half gains i_min i_max i_p99 i_cv%
PER_ITER = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    "
            "i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%")
STAMPED = MODERN + "            timestamp"


def _row(line, header=None):
    return parse_row(line.split(), columns_of(header) if header else None)


def test_modern_row_from_a_real_run():
    # nccl-tests#369: 96 and 32 wrong elements at 1 MiB
    fields, complete = _row("     1048576        262144     float     sum      -1   477.32    2.20    2.20      96   "
                            "492.81    2.13    2.13      32", MODERN)
    assert complete and fields["size"] == 1048576 and fields["count"] == 262144 and fields["root"] == -1
    assert fields["out_of_place"].wrong == 96 and fields["in_place"].wrong == 32
    assert fields["out_of_place"].time_us == 477.32 and fields["in_place"].busbw == 2.13


def test_wrong_counts_printed_with_percent_g():
    """%6g prints 1048576 wrong elements as 1.04858e+06 (src/util.cu writeBenchmarkLineBody)."""
    fields, _ = _row("     2097152        524288     float     sum      -1    311.5    6.73    6.73  1.04858e+06    "
                     "311.3    6.74    6.74  1.04858e+06", MODERN)
    assert fields["out_of_place"].wrong == 1048580 and fields["out_of_place"].failed


def test_not_checked_is_none_not_zero():
    fields, _ = _row("    33554432       8388608     float    none      -1    19.56  1715.44    0.00      0     0.78  "
                     "43046.10    0.00    N/A", MODERN)  # nccl-tests#287, alltoall on one GPU
    assert fields["out_of_place"].wrong == 0 and fields["in_place"].wrong is None


def test_old_layout_error_column_is_a_max_error_not_a_count():
    fields, complete = _row("   268435456      67108864   float     sum    13233   20.29   38.04  5e-07    13430   19.99   "
                            "37.48  5e-07", OLD)  # aws-samples/aws-efa-eks, 2021
    assert complete and fields["root"] is None and fields["redop"] == "sum"
    half = fields["out_of_place"]
    assert half.wrong is None and half.max_error == 5e-07 and not half.failed


def test_asterisk_marks_an_error_over_threshold():
    fields, _ = _row("   268435456      67108864   float     sum    13233   20.29   38.04  5e-07    13430   19.99   "
                     "37.48  2e+01*", OLD)
    assert fields["in_place"].over_threshold and fields["in_place"].failed


def test_old_broadcast_layout_has_root_but_no_redop():
    fields, _ = _row("           8             2   float       0    45.82    0.00    0.00    N/A    38.17    0.00    "
                     "0.00    N/A", OLD_BCAST)  # nccl-tests#82
    assert fields["root"] == 0 and fields["redop"] is None and fields["in_place"].max_error is None


@pytest.mark.parametrize("header", [None, MODERN])
def test_layout_guessed_without_a_header(header):
    line = "   134217728      33554432     float     sum      -1    12192   11.01   11.01      0    12354   10.86   10.86      0"
    fields, complete = _row(line, header)
    assert complete and fields["in_place"].time_us == 12354.0  # times of 10 ms and more print without decimals


def test_guessed_old_layouts():
    assert _row("8 2 float sum 179.1 0.00 0.00 2e-07 176.3 0.00 0.00 1e-07")[0]["out_of_place"].max_error == 2e-07
    assert _row("8 2 float 0 45.82 0.00 0.00 N/A 38.17 0.00 0.00 N/A")[0]["root"] == 0


def test_in_place_only_row():
    """A trace replay (src/util.cu writeBenchMarkLineNullBody) prints 32 blanks instead of the out-of-place half."""
    fields, complete = _row("     1048576        262144     float     sum      -1" + " " * 32 + "   492.81    2.13    2.13      0",
                            MODERN)
    assert complete and fields["out_of_place"] is None and fields["in_place"].busbw == 2.13


def test_per_iteration_columns():
    fields, complete = _row("     1048576        262144     float     sum      -1   477.32    2.20    2.20       0   470.1   "
                            "490.2   489.9     1.2   492.81    2.13    2.13       0   480.0   500.0   499.0     1.1", PER_ITER)
    assert complete and fields["out_of_place"].time_us == 477.32 and fields["in_place"].busbw == 2.13


def test_timestamp_column():
    fields, complete = _row("     1048576        262144     float     sum      -1   477.32    2.20    2.20       0   492.81    "
                            "2.13    2.13       0  2026-01-23 10:00:01", STAMPED)
    assert complete and fields["in_place"].wrong == 0


@pytest.mark.parametrize("line,message", [
    ("8 2 float sum -1 17.49 x 0.00 0 16.41 0.00 0.00 0", "algbw is 'x'"),
    ("8 2 float sum -1 17.49 0.00 0.00 0 16.41 0.00 0.00 0 9 9", "10 values after the 5 leading columns, expected 8"),
    ("8 2 float frob -1 17.49 0.00 0.00 0 16.41 0.00 0.00 0", "redop"),
    ("8 2 float sum -1 17.49 -3.0 0.00 0 16.41 0.00 0.00 0", "algbw"),
])
def test_malformed_rows_raise_row_error_naming_the_field(line, message):
    with pytest.raises(RowError, match=message):
        _row(line, MODERN)


def test_truncated_row_is_incomplete_not_an_error():
    assert _row("  4294967296    1073741824     float     sum      -1    36943  116.26  116.26      0    36917  116.34",
                MODERN)[1] is False


def test_a_malformed_row_in_the_middle_is_skipped_and_counted():
    text = fixture_text("nccl_tests_369_gh200_2node_wrong.txt")
    bad = text.replace("   477.32    2.20    2.20      96", "   477.32    2.20    oops      96")
    doc = read_texts([("x", bad)])
    assert len(doc.runs[0].rows) == 24 and len(doc.malformed) == 1
    assert doc.malformed[0][0].number == 29 and "busbw" in doc.malformed[0][1]


def test_two_runs_in_one_file():
    a, b = fixture_text("rccl_1129_mi100_p2p_disabled.txt"), fixture_text("rccl_1129_mi100_iommu_pt.txt")
    doc = read_texts([("both", a + "\n" + b)])
    assert [len(r.rows) for r in doc.runs] == [25, 25]
    assert [max(row.busbw for row in r.rows) for r in doc.runs] == [11.01, 23.34]


def test_version_and_starting_lines_open_one_run_with_the_header():
    doc = read_texts([("x", fixture_text("nccl_tests_369_gh200_2node_wrong.txt"))])
    (run,) = doc.runs
    assert run.versions == {"nccl-tests": "2.17.8"} and run.collective == "all_reduce"
    assert run.header["ngpus"] == 1 and run.header["warmup_iters"] == "1" and run.out_of_bounds == 4
    assert {ln.text.split(":")[0] for ln in run.footer_lines} >= {"# Out of bounds values ", "# Collective test concluded"}


def test_gather_is_not_mistaken_for_broadcast():
    """nccl-tests#350 ran gather_perf (root 0, redop none, size = count x 4 B x 2 ranks); without its
    command line the columns cannot tell gather from scatter, so the collective stays unknown."""
    from ringlab.nccl import explain_texts

    text = "\n".join([
        "#  Rank  0 Group  0 Pid 101855 on       n013 device  0 [0000:81:00] NVIDIA A100-PCIE-40GB",
        "#  Rank  1 Group  0 Pid  34424 on       n014 device  0 [0000:81:00] NVIDIA A100-PCIE-40GB",
        "   134217728      16777216     float    none       0   3324.7   40.37   20.19      0   3003.4   44.69   22.34      0",
        "   268435456      33554432     float    none       0   6430.2   41.75   20.87      0   5893.6   45.55   22.77      0"])
    (r,) = explain_texts([("x", text)])
    assert r.facts.collective is None and r.facts.world_size == 2
    (g,) = explain_texts([("x", "# Collective test starting: gather_perf\n" + text)])
    assert g.facts.collective == "gather"
