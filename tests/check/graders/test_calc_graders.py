"""04a/05a graders: their own formulas agree with ringlab.calc, give the P2/P5 numbers, and accept
any correct answer (floats included) while rejecting malformed ones."""

import pytest
from hypothesis import given, settings

from ringlab.calc import ModelConfig, grad_comm_bytes, kv_cache_bytes
from ringlab.check import grade
from ringlab.check.graders.ddp_vs_fsdp_traffic import (BWD_AG, BWD_AR, BWD_RS, FWD_AG, expected_breakdown, fsdp_cases,
                                                       fsdp_strategy)
from ringlab.check.graders.kv_cache import KV_CONFIGS, LLAMA_2_70B, expected_kv_bytes, kv_cases, kv_strategy

DTYPE = {1: "fp8", 2: "bf16", 4: "fp32"}


def test_p2_numbers():
    assert expected_breakdown("ddp", 7_000_000_000, 64, 2) == {BWD_AR: 27_562_500_000}
    full = expected_breakdown("fsdp_full_shard", 7_000_000_000, 64, 2)
    assert full == {FWD_AG: 13_781_250_000, BWD_AG: 13_781_250_000, BWD_RS: 13_781_250_000}
    assert sum(full.values()) == 41_343_750_000 == 1.5 * 27_562_500_000
    assert sum(expected_breakdown("fsdp_shard_grad_op", 7_000_000_000, 64, 2).values()) == 27_562_500_000


def test_p5_number():
    assert expected_kv_bytes(LLAMA_2_70B, 4096, 32, 2) == 42_949_672_960 == 327_680 * 4096 * 32


def _calc_breakdown(strategy, n_params, world_size, bytes_per_param):
    comm = grad_comm_bytes(strategy, n_params, world_size, DTYPE[bytes_per_param])
    out = {}
    for call in comm.breakdown:
        key = (call.phase, call.collective)
        out[key] = out.get(key, 0) + call.bytes_sent
    return out


def _nonzero(d):
    return {k: v for k, v in d.items() if v}


@pytest.mark.parametrize("case", fsdp_cases(), ids=lambda c: f"{c['strategy']}-N{c['world_size']}")
def test_ex07_expected_matches_calc(case):
    assert _nonzero(expected_breakdown(**case)) == _calc_breakdown(**case)


@settings(max_examples=60, deadline=None)
@given(fsdp_strategy())
def test_ex07_expected_matches_calc_on_drawn_cases(case):
    assert _nonzero(expected_breakdown(**case)) == _calc_breakdown(**case)


def _model(config):
    return ModelConfig.from_hf_config({**config, "intermediate_size": 1, "vocab_size": 1}, name="case")


@pytest.mark.parametrize("case", kv_cases(), ids=lambda c: f"{c['config']['_name_or_path']}-{c['tokens']}")
def test_ex08_expected_matches_calc(case):
    got = kv_cache_bytes(_model(case["config"]), case["tokens"], case["batch_size"], DTYPE[case["bytes_per_element"]])
    assert expected_kv_bytes(**case) == got


@settings(max_examples=60, deadline=None)
@given(kv_strategy())
def test_ex08_expected_matches_calc_on_drawn_cases(case):
    got = kv_cache_bytes(_model(case["config"]), case["tokens"], case["batch_size"], DTYPE[case["bytes_per_element"]])
    assert expected_kv_bytes(**case) == got


def test_kv_cases_cover_gqa_mqa_window_and_explicit_head_dim():
    kinds = {(c["num_key_value_heads"] == 1, c["num_key_value_heads"] < c["num_attention_heads"],
              c.get("sliding_window") is not None, "head_dim" in c) for c in KV_CONFIGS}
    assert (True, True, False, False) in kinds  # MQA
    assert (False, True, False, False) in kinds  # GQA
    assert any(k[2] for k in kinds) and any(k[3] for k in kinds)  # window; explicit head_dim


def test_float_arithmetic_passes_ex07():
    def floats(strategy, n_params, world_size, bytes_per_param):
        one = (world_size - 1) / world_size * n_params * bytes_per_param
        return {"ddp": {BWD_AR: 2 * one}, "fsdp_shard_grad_op": {FWD_AG: one, BWD_RS: one},
                "fsdp_full_shard": {FWD_AG: one, BWD_AG: one, BWD_RS: one}}[strategy]

    assert grade("04a", floats).status == "passed"


def test_float_arithmetic_passes_ex08():
    def floats(config, tokens, batch_size, bytes_per_element):
        return float(expected_kv_bytes(config, tokens, batch_size, bytes_per_element))

    assert grade("05a", floats).status == "passed"


@pytest.mark.parametrize("answer, words", [
    (lambda *a: None, "return a dict"),
    (lambda *a: {"backward all_reduce": 1}, "(phase, collective) tuples"),
    (lambda *a: {BWD_AR: "many"}, "should be a number"),
    (lambda *a: {BWD_AR: True}, "should be a number"),
])
def test_malformed_ex07_answers(answer, words):
    result = grade("04a", answer)
    assert result.status == "wrong" and words in result.message, str(result)


def test_ex08_null_window_trap():
    def crashes_on_none(config, tokens, batch_size, bytes_per_element):
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        held = min(tokens, config["sliding_window"]) if "sliding_window" in config else tokens
        per_token = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * bytes_per_element
        return per_token * held * batch_size

    result = grade("05a", crashes_on_none)
    assert result.status == "wrong" and "TypeError" in result.message
    assert result.inputs["config"]["sliding_window"] is None
