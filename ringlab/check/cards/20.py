"""Card 20 (Plan the job: pick the TP degree): the values its text uses, and fresh models and clusters."""

from __future__ import annotations

import math

from ringlab.calc.models import get_model
from ringlab.calc.training.memory import Precision, sharded_state_bytes
from ringlab.check.cards import Ask, Slip
from ringlab.check.graders.plan_the_job import expected

PARAMS = {"model": "llama-3-70b", "gpus": 512, "pp": 4, "budget_gb": 40}  # notebook 20's interview question
MODELS = ("llama-3-8b", "llama-3-70b", "llama-2-70b", "qwen2-72b", "llama-3.1-405b")
PP = (1, 2, 4, 8, 16)
BUDGET_GB = (20, 30, 40, 50)

ASKS = (
    Ask("states_gb", "model-state bytes per GPU at TP 1 (ZeRO-1 over the data-parallel ranks)", unit="B", show="GB"),
    Ask("tp", "the smallest TP degree that fits the budget and splits the heads", unit="1", rel_tol=0.0),
)
SLIPS = (
    Slip("states_gb", "wrong_unsharded_gb", "the optimizer state left whole: ZeRO-1 shards its 12 B per parameter "
         "over the {dp} data-parallel ranks"),
    Slip("tp", "wrong_unsharded_tp", "the optimizer state left whole (no ZeRO-1 sharding over {dp} ranks), which "
         "asks for more TP than the budget needs"),
)


def _floor(params: int, gpus: int, pp: int, budget: float, strategy: str, heads: int) -> int:
    """The smallest TP (dividing the GPUs with pp) whose model states per GPU fit ``budget`` bytes."""
    for tp in range(1, heads + 1):
        if gpus % (tp * pp) == 0 and sum(sharded_state_bytes(math.ceil(params / (tp * pp)), gpus // (tp * pp),
                                                             strategy, Precision())) <= budget:
            return tp
    return heads


def values(model: str = "llama-3-70b", gpus: int = 512, pp: int = 4, budget_gb: float = 40) -> dict:
    """Model states per GPU of ``model`` over ``pp`` stages with ZeRO-1 (``sharded_state_bytes``: 2 + 2 + 12/dp
    bytes per parameter), the TP floor they set against ``budget_gb`` of states per GPU, and the TP degree
    ``choose_tp`` picks (``attention_heads_per_rank``'s rule) on 8-GPU nodes."""
    m = get_model(model)
    params = m.param_count()
    min_tp = _floor(params, gpus, pp, budget_gb * 1e9, "zero1", m.num_attention_heads)
    tp, inside = expected(m.num_attention_heads, m.num_key_value_heads, 8, min_tp)
    whole = _floor(params, gpus, pp, budget_gb * 1e9, "ddp", m.num_attention_heads)
    wrong_tp = expected(m.num_attention_heads, m.num_key_value_heads, 8, whole)[0]
    dp1 = gpus // pp
    states = sum(sharded_state_bytes(math.ceil(params / pp), dp1, "zero1", Precision()))
    unsharded = sum(sharded_state_bytes(math.ceil(params / pp), dp1, "ddp", Precision()))
    return {"model": m.name, "gpus": gpus, "pp": pp, "budget_gb": budget_gb, "params_b": params / 1e9,
            "heads": m.num_attention_heads, "kv": m.num_key_value_heads, "dp": dp1,
            "states_gb": states / 1e9, "wrong_unsharded_gb": unsharded / 1e9, "min_tp": min_tp, "tp": tp,
            "wrong_unsharded_tp": wrong_tp,
            "where": "inside one 8-GPU NVLink domain" if inside else "across nodes, off NVLink",
            "tp_dp": gpus // (tp * pp)}


def draw(rng) -> dict:
    """A model of :data:`MODELS`, a pipeline depth and a budget; 512 or 1,024 GPUs."""
    return {"model": str(rng.choice(MODELS)), "gpus": int(rng.choice([512, 1024])), "pp": int(rng.choice(PP)),
            "budget_gb": float(rng.choice(BUDGET_GB))}
