from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from ringlab.calc.units import DTYPE_BYTES, canonical_dtype, dtype_bytes, format_bytes, format_flops, parse_size


def test_format_bytes_shows_exact_gb_and_gib():
    assert format_bytes(42_949_672_960) == "42,949,672,960 B (42.95 GB / 40.00 GiB)"
    assert format_bytes(14 * 10**9) == "14,000,000,000 B (14.00 GB / 13.04 GiB)"


def test_dtype_sizes_and_aliases():
    assert [dtype_bytes(n) for n in ("fp32", "fp16", "bf16", "fp8", "int8")] == [4, 2, 2, 1, 1]
    assert dtype_bytes("int4") == Fraction(1, 2)
    assert dtype_bytes("bfloat16") == 2 and dtype_bytes("torch.float16") == 2 and dtype_bytes("Float32") == 4
    assert canonical_dtype("float8_e4m3fn") == "fp8"
    assert set(DTYPE_BYTES) == {"fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"}


def test_unknown_dtype_lists_accepted_names():
    with pytest.raises(ValueError, match="bf16") as e:
        dtype_bytes("bf61")
    assert "Accepted" in str(e.value)
    with pytest.raises(TypeError):
        dtype_bytes(2)


@pytest.mark.parametrize("text, expected", [
    ("64MiB", 64 * 2**20), ("1GB", 10**9), ("7e9", 7 * 10**9), ("1.5 GiB", 3 * 2**29), ("450GB", 450 * 10**9),
    ("4096", 4096), ("1,000", 1000), (7e9, 7 * 10**9), (12, 12), ("2k", 2000), ("70B", 70),
    ("16Mb", 2 * 10**6), ("1_000", 1000),  # b is a bit, B a byte (the full grammar: test_parsing.py)
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "12 parsecs", "-5", "0", "0.5", "1.5e0B", True, "2,5GB", "16mb", "1e31",
                                 "1e88888888", "nan"])
def test_parse_size_rejects(bad):
    with pytest.raises((ValueError, TypeError)):
        parse_size(bad)


@given(st.integers(min_value=1, max_value=10**15))
def test_parse_size_round_trips_integers(n):
    assert parse_size(str(n)) == n
    assert parse_size(f"{n}KiB") == n * 1024


def test_format_flops():
    assert format_flops(312e12) == "312.0 TFLOP/s"
    assert format_flops(1.979e15) == "2.0 PFLOP/s"


def test_positive_int():
    import numpy as np

    from ringlab.validation import positive_int

    assert positive_int(7e9, "n") == 7 * 10**9 and positive_int(np.int64(3), "n") == 3
    for bad, exc in ((0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError), ("3", TypeError)):
        with pytest.raises(exc, match="n must be a positive integer"):
            positive_int(bad, "n")


def test_parse_count_reads_b_as_billion():
    from ringlab.calc.units import parse_count

    assert parse_count("7B") == 7 * 10**9 and parse_count("70M") == 70 * 10**6
    assert parse_count("1.5T") == 15 * 10**11 and parse_count("7e9") == 7 * 10**9 and parse_count(12) == 12
    for bad in ["7GiB", "-7B", "0", "7.5", "seven", "3,5B", "7m", "1e500"]:
        with pytest.raises(ValueError):
            parse_count(bad)
