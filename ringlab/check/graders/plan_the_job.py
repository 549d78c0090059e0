"""Grader for topic 20, planning the job (card 20).

* 20a ``choose_tp(num_attention_heads, num_key_value_heads, gpus_per_node, min_tp) -> (tp, inside_nvlink)``.

The expected degree is the smallest ``tp >= min_tp`` that :func:`ringlab.calc.kvcache.attention_heads_per_rank`
accepts for a model with those heads (the one home of the rule ``calc train``, ``calc decode`` and ``plan
train`` use), never a rule written here. When an answer is wrong the grader names the classic mistake it
matches: the KV heads forgotten, powers of two only, rounding down below what memory needs, or "inside
NVLink" read as strictly smaller than the node.
"""

from __future__ import annotations

from ringlab.calc.kvcache import attention_heads_per_rank
from ringlab.calc.models import ModelConfig

from ..engine import CaseFailure, run_grader
from ..exercise import Exercise


def _model(heads: int, kv: int) -> ModelConfig:
    return ModelConfig.from_hf_config(dict(model_type="llama", hidden_size=128 * heads, intermediate_size=256,
                                           num_attention_heads=heads, num_key_value_heads=kv, num_hidden_layers=1,
                                           vocab_size=256), name=f"{heads}-heads-{kv}-kv")


def _usable(heads: int, kv: int, tp: int) -> bool:
    try:
        attention_heads_per_rank(_model(heads, kv), tp)
    except ValueError:
        return False
    return True


def expected(num_attention_heads: int, num_key_value_heads: int, gpus_per_node: int, min_tp: int) -> tuple[int, bool]:
    tp = next(t for t in range(min_tp, num_attention_heads + 1) if _usable(num_attention_heads, num_key_value_heads, t))
    return tp, tp <= gpus_per_node


def tp_cases() -> list[dict]:
    """Llama 3 (128 / 8 heads, the 405B; 64 / 8, the 70B), MHA, odd head counts, and TP past the node."""
    rows = [(128, 8, 8, 8), (64, 8, 8, 3), (40, 40, 8, 3), (40, 8, 8, 3), (24, 24, 8, 5), (96, 8, 8, 12),
            (32, 8, 8, 1), (64, 8, 4, 5), (128, 8, 72, 9), (71, 1, 8, 2), (56, 8, 8, 8), (48, 16, 8, 3)]
    return [dict(num_attention_heads=h, num_key_value_heads=k, gpus_per_node=g, min_tp=m) for h, k, g, m in rows]


def tp_strategy():
    """Hypothesis strategy: heads = kv x group with kv in 1..32 and group in 1..8, nodes of 4, 8 or 72 GPUs."""
    from hypothesis import strategies as st

    @st.composite
    def case(draw):
        kv = draw(st.integers(1, 32))
        heads = kv * draw(st.integers(1, 8))
        return dict(num_attention_heads=heads, num_key_value_heads=kv, gpus_per_node=draw(st.sampled_from([4, 8, 72])),
                    min_tp=draw(st.integers(1, heads)))

    return case()


def known_mistakes(num_attention_heads: int, num_key_value_heads: int, gpus_per_node: int,
                   min_tp: int) -> dict[str, tuple[int, bool]]:
    """The classic wrong answers for this case, explanation -> (tp, inside)."""
    h, kv, g, m = num_attention_heads, num_key_value_heads, gpus_per_node, min_tp
    heads_only = next(t for t in range(m, h + 1) if h % t == 0)
    power = next((t for t in (1 << i for i in range(12)) if t >= m and _usable(h, kv, t)), None)
    below = [t for t in range(1, m + 1) if _usable(h, kv, t)]
    tp, _ = expected(h, kv, g, m)
    out = {
        "that splits the query heads but not the KV heads: with grouped-query attention tp and "
        "num_key_value_heads must divide one another": (heads_only, heads_only <= g),
        "that tries powers of two only; any degree that splits the heads works (6 for 24 heads)":
            (power, power <= g) if power else None,
        "that rounds down to a degree that splits the heads, but memory needs at least min_tp: "
        "search upwards": (below[-1], below[-1] <= g) if below else None,
        "that says a group of exactly gpus_per_node GPUs leaves the node; it fills it, on NVLink": (tp, tp < g),
    }
    return {why: value for why, value in out.items() if value is not None}


def check_tp(fn, num_attention_heads: int, num_key_value_heads: int, gpus_per_node: int, min_tp: int) -> None:
    """20a: the smallest usable TP degree >= min_tp and whether it fits one node."""
    want = expected(num_attention_heads, num_key_value_heads, gpus_per_node, min_tp)
    got = fn(num_attention_heads, num_key_value_heads, gpus_per_node, min_tp)
    if (not isinstance(got, tuple) or len(got) != 2 or isinstance(got[0], bool) or not isinstance(got[0], int)
            or not isinstance(got[1], bool)):
        raise CaseFailure(f"return a tuple (tp: int, inside_nvlink: bool), got {got!r}")
    if got == want:
        return
    why = next((w for w, value in known_mistakes(num_attention_heads, num_key_value_heads, gpus_per_node,
                                                  min_tp).items() if value == got and value != want), "")
    raise CaseFailure(f"should be tp={want[0]}, inside_nvlink={want[1]} (the smallest degree >= {min_tp} that "
                      f"splits {num_attention_heads} heads and {num_key_value_heads} KV heads; {gpus_per_node} GPUs "
                      f"per node), got {got!r}" + (f"; {why}" if why else ""))


def _tp(fn):
    return run_grader("20a", "choose_tp", fn, check_tp, tp_cases(), tp_strategy(),
                      "the TP degree and its placement match calc's head-splitting rule for every model tried")


EXERCISES = (
    Exercise("20a", "choose_tp", "Pick the TP degree", _tp, (
        "Two rules: memory sets a floor (min_tp), the attention sets which degrees are allowed. Start at the "
        "floor and go up.",
        "A degree is allowed when every rank gets whole query heads (tp divides num_attention_heads) and whole "
        "KV heads, or one replicated KV head: tp divides num_key_value_heads, or num_key_value_heads divides tp.",
        "for tp in range(min_tp, heads + 1): if both rules hold, return (tp, tp <= gpus_per_node).",
    )),
)
