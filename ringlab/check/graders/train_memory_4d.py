"""Grader for topic 17, memory and traffic of DP x TP x PP x EP training with ZeRO (card 17).

* 17a ``memory_per_gpu(n_params, dp, zero_stage, hidden, heads, layers, seq_len, micro_batch, tp, pp,
  sequence_parallel) -> {"params", "grads", "optimizer", "activations"}``: bytes on one GPU of the first stage.
* 17b ``layer_traffic(hidden, seq_len, micro_batch, tp, ep, top_k, bytes_per_element) -> {"tp", "ep"}``:
  bytes one GPU sends per MoE layer and micro-batch, forward and backward.

Expected values come from ringlab's calculators: :func:`ringlab.calc.training.memory.sharded_state_bytes`,
:func:`ringlab.calc.training.activations.layer_activation_bytes` with
:func:`ringlab.calc.pipeline.peak_in_flight`, :func:`ringlab.calc.comm.ring_bytes_per_rank` and
:func:`ringlab.collectives.pairwise_all_to_all_bytes` (tests/calc/training/test_train_memory_grader.py checks
them against ``stage_traffic`` too). Wrong answers that match a classic mistake get a message naming it:
fp32 master weights ignored, ZeRO-1 counted as sharding gradients, the sequence-parallel saving forgotten,
only one micro-batch in flight, the TP all-reduce counted once per layer or as one reduce-scatter, the EP
all-to-all counted once per layer or without its top_k copies (confirmed by asking the learner's function
again with one more expert per token, since top_k = 2 halves the bytes as forgetting backward does).
"""

from __future__ import annotations

from ringlab.calc import ModelConfig
from ringlab.calc.comm import ring_bytes_per_rank
from ringlab.calc.pipeline import peak_in_flight
from ringlab.calc.training.activations import layer_activation_bytes
from ringlab.calc.training.layout import ParallelLayout
from ringlab.calc.training.memory import Precision, sharded_state_bytes
from ringlab.collectives import pairwise_all_to_all_bytes

from ..engine import CaseFailure, as_bytes, run_grader, within_a_byte
from ..exercise import Exercise

STAGES = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
MEMORY_KEYS = ("params", "grads", "optimizer", "activations")
TRAFFIC_KEYS = ("tp", "ep")


def _gpt(hidden: int, heads: int, layers: int):
    return ModelConfig.from_hf_config(dict(model_type="gpt2", n_embd=hidden, n_layer=layers, n_head=heads,
                                           n_positions=2048, vocab_size=51200), name="exercise-gpt")


def expected_memory(n_params, dp, zero_stage, hidden, heads, layers, seq_len, micro_batch, tp, pp,
                    sequence_parallel) -> dict[str, int]:
    """17a's answer from ringlab's calculators (module docstring)."""
    params, grads, optimizer = sharded_state_bytes(n_params, dp, STAGES[zero_stage], Precision())
    model = _gpt(hidden, heads, layers)
    layout = ParallelLayout(tp=tp, sequence_parallel=bool(sequence_parallel and tp > 1))
    per_layer = layer_activation_bytes(model, model.layers[0], seq_len, micro_batch, layout, "selective").total
    in_flight = int(peak_in_flight(pp, pp)[0]) if pp > 1 else 1
    return {"params": params, "grads": grads, "optimizer": optimizer,
            "activations": per_layer * (layers // pp) * in_flight}


def _memory_diagnosis(key: str, got: float, want: int, case: dict) -> str:
    n, dp, stage, tp, pp = case["n_params"], case["dp"], case["zero_stage"], case["tp"], case["pp"]
    sbh = case["seq_len"] * case["micro_batch"] * case["hidden"]
    layers = case["layers"]
    sp = case["sequence_parallel"] and tp > 1
    if key == "optimizer":
        shard = dp if stage >= 1 else 1
        if within_a_byte(got, 8 * n / shard):
            return (f"optimizer: {got:,.0f} B is Adam's two fp32 moments only (8 B per parameter): mixed-precision "
                    f"Adam also keeps an fp32 master copy of the weights, 4 B more, 12 B in all (expected {want:,} B)")
        if stage >= 1 and within_a_byte(got, 12 * n):
            return f"optimizer: ZeRO stage {stage} shards the optimizer state over dp = {dp} (expected {want:,} B)"
    if key == "grads":
        if stage == 1 and within_a_byte(got, 2 * n / dp):
            return ("grads: ZeRO-1 shards only the optimizer state; every rank still holds the whole gradient "
                    f"until its reduce-scatter (ZeRO-2 shards gradients). Expected {want:,} B")
        if stage >= 2 and within_a_byte(got, 2 * n):
            return f"grads: ZeRO stage {stage} shards the gradients over dp = {dp} (expected {want:,} B)"
        if stage < 2 and dp > 1 and within_a_byte(got, 2 * n / dp):
            return f"grads: ZeRO stage {stage} does not shard gradients (expected {want:,} B)"
    if key == "params":
        if stage == 3 and within_a_byte(got, 2 * n):
            return f"params: ZeRO-3 shards the weights themselves over dp = {dp} (expected {want:,} B)"
        if stage < 3 and dp > 1 and within_a_byte(got, 2 * n / dp):
            return f"params: only ZeRO-3 shards the weights; stage {stage} keeps them whole (expected {want:,} B)"
    if key == "activations":
        no_sp = sbh * (10 + 24 / tp) * layers
        with_sp = 34 * sbh / tp * layers
        if sp and within_a_byte(got, no_sp):
            return ("activations: sequence parallelism also shards the 10 s b h of LayerNorm inputs, dropout masks "
                    "and matmul inputs that plain TP replicates: 34 s b h / tp per layer, not s b h (10 + 24/tp) "
                    f"(expected {want:,} B)")
        if not sp and tp > 1 and within_a_byte(got, with_sp):
            return ("activations: without sequence parallelism the LayerNorm inputs, dropout masks and matmul inputs "
                    f"(10 s b h) are replicated on every TP rank: s b h (10 + 24/tp) per layer (expected {want:,} B)")
        if pp > 1 and within_a_byte(got * pp, want):
            return (f"activations: 1F1B's first stage holds pp = {pp} micro-batches in flight, not one: "
                    f"pp x layers/pp layers, all {layers} layers' worth (expected {want:,} B)")
        heads, s = case["heads"], case["seq_len"]
        scores = 5 * heads * s * s * case["micro_batch"] / tp * layers
        if within_a_byte(got, want + scores):
            return ("activations: with selective recomputation (or FlashAttention) the attention scores are not "
                    f"kept: drop the 5 a s^2 b / tp term (expected {want:,} B)")
    return f"{key}: expected {want:,} B, got {got:,.0f} B ({got / want:.4g}x)" if want else \
        f"{key}: expected 0 B, got {got:,.0f} B"


def _as_dict(result, keys: tuple[str, ...], function: str) -> dict[str, float]:
    if not isinstance(result, dict):
        raise CaseFailure(f"{function} should return a dict with keys {', '.join(keys)}, got {type(result).__name__}")
    missing = [k for k in keys if k not in result]
    if missing:
        raise CaseFailure(f"{function}: the dict has no {', '.join(repr(k) for k in missing)} (keys: {', '.join(keys)})")
    return {k: as_bytes(result[k], repr(k)) for k in keys}


def check_memory(fn, **case) -> None:
    """17a: every entry against :func:`expected_memory`."""
    got = _as_dict(fn(**case), MEMORY_KEYS, "memory_per_gpu")
    want = expected_memory(**case)
    for key in MEMORY_KEYS:
        if not within_a_byte(got[key], want[key]):
            raise CaseFailure(_memory_diagnosis(key, got[key], want[key], case))


def expected_traffic(hidden, seq_len, micro_batch, tp, ep, top_k, bytes_per_element) -> dict[str, int]:
    """17b's answer from ringlab's collectives: 4 ring all-reduces and 4 pairwise all-to-alls."""
    tokens = micro_batch * seq_len
    tp_bytes = 4 * ring_bytes_per_rank("all_reduce", tokens * hidden, tp, bytes_per_element) if tp > 1 else 0
    ep_bytes = 4 * int(pairwise_all_to_all_bytes(ep, tokens * top_k * hidden, bytes_per_element)[0]) if ep > 1 else 0
    return {"tp": tp_bytes, "ep": ep_bytes}


def _ignores_top_k(fn, case: dict, got: float) -> bool:
    """Whether the learner's EP bytes stay ``got`` when every token goes to one more expert."""
    try:
        probe = fn(**{**case, "top_k": case["top_k"] + 1})
        return within_a_byte(as_bytes(probe["ep"], "'ep'"), got)
    except Exception:  # a probe only: the case itself reports the learner's error
        return False


def _traffic_diagnosis(key: str, got: float, want: int, case: dict, fn=None) -> str:
    m = case["micro_batch"] * case["seq_len"] * case["hidden"] * case["bytes_per_element"]
    if key == "tp":
        one = want / 4
        if within_a_byte(got, one):
            return ("tp: you counted one all_reduce per layer: each layer has two blocks (attention and MLP), each "
                    f"with an all_reduce in forward and another in backward, 4 per layer (expected {want:,} B)")
        if within_a_byte(got, 2 * one):  # 2 x 2(N-1)/N M and 4 x (N-1)/N M are the same number for every N
            return ("tp: that is half the bytes, 4 x (N-1)/N x M: either each all_reduce is counted as (N-1)/N x M, "
                    "one reduce-scatter, when a ring all_reduce is a reduce-scatter plus an all-gather, 2(N-1)/N x M "
                    "per rank; or it is the forward pass only (two all-reduces per layer), when backward "
                    f"all-reduces the input gradient of each block too, 4 per layer (expected {want:,} B)")
        if within_a_byte(got, 4 * m):
            return (f"tp: you counted each all_reduce as M = {m:,} B; a ring all_reduce sends 2(N-1)/N x M per rank "
                    f"(expected {want:,} B)")
        if within_a_byte(got, 8 * m):
            return f"tp: the (N-1)/N factor is missing: a rank never sends the chunk it owns (expected {want:,} B)"
    if key == "ep":
        one = want / 4
        if case["top_k"] > 1 and within_a_byte(got * case["top_k"], want) and fn and _ignores_top_k(fn, case, got):
            return (f"ep: each token goes to top_k = {case['top_k']} experts, so each all_to_all moves top_k copies "
                    f"of it; your bytes do not change with top_k (expected {want:,} B)")
        if within_a_byte(got, one):
            return ("ep: you counted one all_to_all per MoE layer: tokens are dispatched to their experts and the "
                    "results combined back, and backward does both again, 4 per layer (expected "
                    f"{want:,} B)")
        if within_a_byte(got, 2 * one):
            return f"ep: that is forward only; backward runs dispatch and combine again (expected {want:,} B)"
        if case["top_k"] > 1 and within_a_byte(got * case["top_k"], want):
            return (f"ep: each token goes to top_k = {case['top_k']} experts, so each all_to_all moves top_k copies "
                    f"(expected {want:,} B)")
        ep = case["ep"]
        if ep > 1 and within_a_byte(got * (ep - 1) / ep, want):
            return (f"ep: the 1/ep of the tokens routed to the rank's own experts never leaves it: (ep-1)/ep of the "
                    f"routed bytes (expected {want:,} B)")
    return f"{key}: expected {want:,} B, got {got:,.0f} B" + (f" ({got / want:.4g}x)" if want else "")


def check_traffic(fn, **case) -> None:
    """17b: both entries against :func:`expected_traffic`."""
    got = _as_dict(fn(**case), TRAFFIC_KEYS, "layer_traffic")
    want = expected_traffic(**case)
    for key in TRAFFIC_KEYS:
        if not within_a_byte(got[key], want[key]):
            raise CaseFailure(_traffic_diagnosis(key, got[key], want[key], case, fn))


def memory_cases() -> list[dict]:
    """GPT-3 175B on TP 8 x PP 16 first (ZeRO-1, SP), then every ZeRO stage, no TP, no PP, SP off, dp = 1."""
    gpt3 = dict(hidden=12288, heads=96, layers=96, seq_len=2048, micro_batch=1)
    shard = 174_600_000_000 // 128 // 64 * 64  # GPT-3's parameters over TP 8 x PP 16, a multiple of dp
    cases = [dict(n_params=shard, dp=64, zero_stage=1, tp=8, pp=16, sequence_parallel=True, **gpt3)]
    cases += [dict(n_params=shard, dp=64, zero_stage=z, tp=8, pp=16, sequence_parallel=sp, **gpt3)
              for z in (0, 2, 3) for sp in (True, False)]
    small = dict(hidden=4096, heads=32, layers=32, seq_len=4096, micro_batch=2)
    cases += [dict(n_params=7_000_000_000, dp=8, zero_stage=z, tp=1, pp=1, sequence_parallel=False, **small)
              for z in range(4)]
    cases += [dict(n_params=1_750_000_000, dp=1, zero_stage=3, tp=4, pp=4, sequence_parallel=True, **small),
              dict(n_params=875_000_000, dp=2, zero_stage=1, tp=2, pp=8, sequence_parallel=False, **small)]
    return cases


def memory_strategy():
    """Hypothesis strategy of 17a cases: tp divides heads, pp divides layers, dp divides n_params."""
    from hypothesis import strategies as st

    @st.composite
    def draw(d):
        tp = d(st.sampled_from((1, 2, 4, 8)))
        pp = d(st.sampled_from((1, 2, 4, 8)))
        dp = d(st.sampled_from((1, 2, 3, 8, 64)))
        heads = tp * d(st.integers(1, 16))
        return dict(n_params=dp * d(st.integers(1, 10**10)), dp=dp, zero_stage=d(st.integers(0, 3)),
                    hidden=heads * d(st.sampled_from((64, 128))), heads=heads, layers=pp * d(st.integers(1, 12)),
                    seq_len=d(st.sampled_from((512, 1024, 2048, 4096))), micro_batch=d(st.integers(1, 4)),
                    tp=tp, pp=pp, sequence_parallel=d(st.booleans()) and tp > 1)

    return draw()


def traffic_cases() -> list[dict]:
    """Mixtral-8x7B-like layers (h 4096, top-2) on TP 8 x EP 8 first, then no TP, no EP, top-1, fp32."""
    base = dict(hidden=4096, seq_len=4096, micro_batch=1, top_k=2, bytes_per_element=2)
    return [dict(tp=8, ep=8, **base), dict(tp=1, ep=8, **base), dict(tp=4, ep=1, **base),
            dict(tp=2, ep=2, **{**base, "top_k": 1}), dict(tp=8, ep=64, **{**base, "top_k": 8, "hidden": 7168}),
            dict(tp=2, ep=4, **{**base, "bytes_per_element": 4, "micro_batch": 3})]


def traffic_strategy():
    """Hypothesis strategy of 17b cases (tp and ep divide the elements, so ring shares are whole)."""
    from hypothesis import strategies as st

    return st.fixed_dictionaries({
        "hidden": st.sampled_from((1024, 2048, 4096, 7168)), "seq_len": st.sampled_from((128, 1024, 4096)),
        "micro_batch": st.integers(1, 8), "tp": st.sampled_from((1, 2, 4, 8)), "ep": st.sampled_from((1, 2, 4, 8, 16)),
        "top_k": st.integers(1, 8), "bytes_per_element": st.sampled_from((1, 2, 4)),
    })


def _memory(fn):
    return run_grader("17a", "memory_per_gpu", fn, check_memory, memory_cases(), memory_strategy(),
                      "model states and activations per GPU match for every ZeRO stage, with and without SP and PP")


def _traffic(fn):
    return run_grader("17b", "layer_traffic", fn, check_traffic, traffic_cases(), traffic_strategy(),
                      "TP all-reduces and EP all-to-alls per layer match: 4 of each, forward and backward")


EXERCISES = (
    Exercise("17a", "memory_per_gpu", "Memory per GPU under ZeRO, TP, SP and PP", _memory, (
        "Model states: 2 B weights + 2 B gradients + 12 B optimizer per parameter (the 12 includes fp32 master "
        "weights). ZeRO stage k shards the first k of: optimizer state, gradients, weights.",
        "Activations per layer: s b h (10 + 24/tp) with TP alone (10 s b h replicated), 34 s b h / tp with "
        "sequence parallelism; selective recomputation keeps no attention scores.",
        "1F1B's first stage holds pp micro-batches of layers/pp layers: the whole model's layers' worth.",
    )),
    Exercise("17b", "layer_traffic", "TP and EP traffic per layer", _traffic, (
        "A ring all_reduce of M bytes sends 2(N-1)/N x M per rank; an all_to_all sends (N-1)/N of its buffer.",
        "TP: attention and MLP each all-reduce in forward and again in backward. EP: dispatch and combine in "
        "forward, and both again in backward.",
        "The all_to_all buffer holds top_k copies of every token: b x s x top_k x h elements.",
    )),
)
