"""The fault SPEC grammar: what each rule selects, server-wide caps, and one-line errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.shards import parse_faults

SHARDS = [f"model-0000{k}-of-00004.safetensors" for k in range(1, 5)]


def hit(plan, k: int, attempt: int):
    fault = plan.fault_for(SHARDS[k - 1], k, attempt)
    return fault.spec if fault else None


def test_selectors_by_number_name_star_and_request_range():
    plan = parse_faults(f"2#1=status:503:1; {SHARDS[2]}#2-3=reset:0.5; *#4-=latency:10ms", shards=SHARDS)
    assert [hit(plan, 2, a) for a in (1, 2)] == ["2#1=status:503:1", None]
    assert [hit(plan, 3, a) for a in (1, 2, 3, 4)] == [None, f"{SHARDS[2]}#2-3=reset:0.5",
                                                       f"{SHARDS[2]}#2-3=reset:0.5", "*#4-=latency:10ms"]
    assert hit(plan, 1, 9) == "*#4-=latency:10ms" and hit(plan, 1, 3) is None


def test_the_first_matching_rule_wins():
    plan = parse_faults("1#1=status:404; 1=reset:0", shards=SHARDS)
    assert hit(plan, 1, 1) == "1#1=status:404" and hit(plan, 1, 2) == "1=reset:0"


def test_each_kind_parses_its_arguments():
    plan = parse_faults("1=latency:250ms; 2=throttle:4MiB/s; 3=stall:0.5:2; 4=status:429:1.5", shards=SHARDS)
    latency, throttle, stall, status = (r.fault for r in plan.rules)
    assert latency.seconds == 0.25 and throttle.rate == 4 * 2**20
    assert stall.fraction == 0.5 and stall.seconds == 2.0 and status.status == 429 and status.seconds == 1.5
    assert parse_faults("1=stall:0.1").rules[0].fault.seconds is None  # silent until the client leaves


def test_server_wide_caps():
    plan = parse_faults("conn=8MiB/s; link=100MB/s; busy=8:1MiB/s")
    assert (plan.conn_rate, plan.link_rate, plan.busy) == (8 * 2**20, 100e6, (8, 2**20))
    assert parse_faults("").describe() == "no faults"


@pytest.mark.parametrize("spec", ["1", "=reset:0.5", "1=", "1=explode", "1=reset", "1=reset:2", "1=reset:-0.1",
                                  "1=status:200", "1=status:404:-1", "9=status:404", "nope.bin=reset:0.5",
                                  "1#0=reset:0.5", "1#3-2=reset:0.5", "1?1.5=reset:0.5", "busy=8", "conn=fast",
                                  "1=latency:1e9", "1=throttle:0", "1=reset:0.5:1"])
def test_bad_rules_are_one_line_naming_the_rule(spec):
    with pytest.raises(ValueError) as err:
        parse_faults(spec, shards=SHARDS)
    assert "\n" not in str(err.value) and "fault" in str(err.value)


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(0, 3)), max_size=6),
       st.integers(1, 4), st.integers(1, 8))
def test_a_range_rule_hits_exactly_its_requests(rules, k, attempt):
    """Against a direct reading of the grammar: rule (shard, a, width) hits requests a..a+width of its shard."""
    spec = "; ".join(f"{s}#{a}-{a + w}=status:50{i % 4}" for i, (s, a, w) in enumerate(rules))
    plan = parse_faults(spec, shards=SHARDS)
    expected = next((f"{s}#{a}-{a + w}=status:50{i % 4}" for i, (s, a, w) in enumerate(rules)
                     if s == k and a <= attempt <= a + w), None)
    assert hit(plan, k, attempt) == expected
