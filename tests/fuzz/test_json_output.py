"""``--json`` output is always RFC 8259 JSON (no NaN, no Infinity), on hypothesis-drawn valid inputs.

Each call must either succeed (exit 0, or 1 where the command reports a finding) with a JSON
document on stdout, or refuse with one line on stderr (exit 2): never print what a strict JSON
parser rejects.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_harness import STATS, run_cli
from ringlab.calc.comm import STRATEGIES
from ringlab.calc.hardware import HARDWARE
from ringlab.calc.models import MODELS
from ringlab.calc.pipeline import SCHEDULES
from ringlab.collectives import COLLECTIVES
from ringlab.collectives.cost import LINKS

NCCL = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
DTYPES = ["fp32", "fp16", "bf16", "fp8", "int8"]
QUICK = settings(max_examples=8, derandomize=True, database=None, deadline=None,
                 suppress_health_check=list(HealthCheck))


def _refuse(constant: str):
    raise ValueError(f"not JSON (RFC 8259): {constant}")


def check_json(argv: list[str], ok_codes=(0,)) -> None:
    outcome = run_cli(argv, timeout=20)
    assert outcome.error is None and not outcome.hung, outcome.describe()
    if outcome.code == 2:
        assert outcome.err.count("\n") == 1 and "Traceback" not in outcome.err, outcome.describe()
        return
    assert outcome.code in ok_codes, outcome.describe()
    json.loads(outcome.out, parse_constant=_refuse)
    STATS["json_documents"] += 1


def num(x) -> str:
    return repr(x) if isinstance(x, float) else str(x)


@QUICK
@given(st.sampled_from(COLLECTIVES), st.integers(1, 4096), st.integers(1, 2**40), st.sampled_from(list(LINKS)),
       st.none() | st.floats(0, 1e-3), st.none() | st.floats(1e6, 1e13), st.floats(0, 1e-9))
def test_cost(collective, world_size, size, fabric, alpha, bandwidth, gamma):
    argv = ["cost", "--json", "--collective", collective, "--world-size", str(world_size), "--size", str(size),
            "--fabric", fabric, "--gamma", num(gamma)]
    argv += [] if alpha is None else ["--alpha", num(alpha)]
    argv += [] if bandwidth is None else ["--bandwidth", num(bandwidth)]
    check_json(argv)


@QUICK
@given(st.sampled_from(list(MODELS)), st.integers(1, 131072), st.integers(1, 256), st.sampled_from(DTYPES),
       st.sampled_from([1, 2, 8]), st.none() | st.sampled_from([16, 32]))
def test_calc_kv(model, tokens, batch, dtype, tp, block):
    argv = ["calc", "kv", "--json", "--model", model, "--tokens", str(tokens), "--batch", str(batch),
            "--dtype", dtype, "--tp", str(tp)]
    check_json(argv + ([] if block is None else ["--block-size", str(block)]))


@QUICK
@given(st.sampled_from(STRATEGIES), st.integers(10**6, 10**12), st.sampled_from([1, 8, 64, 1024]),
       st.sampled_from(["bf16", "fp32", "fp16"]), st.integers(1, 8), st.none() | st.floats(1e6, 1e13))
def test_calc_comm(strategy, params, world_size, dtype, accum, bandwidth):
    argv = ["calc", "comm", "--json", "--strategy", strategy, "--params", str(params), "--world-size",
            str(world_size), "--dtype", dtype, "--grad-accum", str(accum)]
    if strategy == "hybrid_shard":
        argv += ["--gpus-per-node", "1"]
    check_json(argv + ([] if bandwidth is None else ["--bandwidth", num(bandwidth)]))


@QUICK
@given(st.floats(1, 1e18), st.integers(1, 10**15), st.sampled_from(list(HARDWARE)), st.sampled_from(DTYPES),
       st.booleans())
def test_calc_roofline(flops, nbytes, hardware, dtype, sparse):
    argv = ["calc", "roofline", "--json", "--flops", num(flops), "--bytes", str(nbytes), "--hardware", hardware,
            "--dtype", dtype]
    check_json(argv + (["--sparse"] if sparse else []))


@QUICK
@given(st.sampled_from(list(MODELS)), st.sampled_from(list(HARDWARE)), st.integers(1, 32768),
       st.none() | st.integers(1, 512), st.none() | st.floats(1, 1000))
def test_calc_decode(model, hardware, context, batch, sla_ms):
    argv = ["calc", "decode", "--json", "--model", model, "--hardware", hardware, "--context", str(context)]
    argv += ["--batch", str(batch or 1)] if sla_ms is None or batch else []
    check_json(argv + ([] if sla_ms is None else ["--sla-ms", num(sla_ms)]))


@QUICK
@given(st.integers(1, 16), st.integers(1, 64), st.sampled_from(SCHEDULES), st.integers(1, 4), st.integers(1, 4),
       st.booleans())
def test_calc_bubble(stages, micro, schedule, virtual, t_f, grid):
    argv = ["calc", "bubble", "--json", "--stages", str(stages), "--microbatches", str(micro), "--schedule", schedule,
            "--virtual-stages", str(virtual), "--t-f", str(t_f)]
    check_json(argv + (["--grid"] if grid else []))


@QUICK
@given(st.sampled_from(COLLECTIVES), st.lists(st.integers(1, 12), min_size=1, max_size=3),
       st.integers(0, 300), st.sampled_from(["float32", "float16", "int32"]))
def test_verify(collective, sizes, numel, dtype):
    argv = ["verify", "--json", "--input", "random", "--collective", collective,
            "--world-sizes", ",".join(map(str, sizes)), "--numel", str(numel), "--dtype", dtype]
    check_json(argv)


@pytest.mark.parametrize("fixture", sorted(p.name for p in NCCL.glob("*.txt")))
def test_explain(fixture):
    check_json(["explain", "--json", str(NCCL / fixture)], ok_codes=(0, 1))


@settings(max_examples=4, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.floats(0.5, 5), st.sampled_from(["fixed", "naive"]), st.booleans())
def test_serve_sim(rate, policy, chunked):
    argv = ["serve-sim", "--json", "--seconds", "2", "--rate", num(rate), "--policy", policy]
    check_json(argv + (["--chunked-prefill"] if chunked else []))
