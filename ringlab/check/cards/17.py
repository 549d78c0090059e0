"""Card 17 (Memory and traffic of DP x TP x PP x EP training with ZeRO): the values its text uses."""

from __future__ import annotations

from ringlab.calc import ModelConfig
from ringlab.calc.training.layout import ParallelLayout
from ringlab.calc.training.plan import train_plan
from ringlab.check.cards import Ask, Slip

ASKS = (
    Ask("act_gb", "activation bytes on one GPU of the first stage at its peak", unit="B", show="GB"),
    Ask("total_gb", "memory of one GPU of the first stage (model states + activations)", unit="B", show="GB"),
)
_FLIGHT = "one micro-batch in flight instead of {pp}: 1F1B's first stage holds {pp}"
_NOSP = "the sequence-parallel saving forgotten: TP alone keeps s b h (10 + 24/t) per layer, {sp_ratio:.1f}x more"
SLIPS = (
    Slip("act_gb", "wrong_flight_act_gb", _FLIGHT),
    Slip("act_gb", "wrong_nosp_act_gb", _NOSP),
    Slip("total_gb", "wrong_grads_gb", "ZeRO-1 counted as sharding the gradients; it shards only the optimizer state"),
    Slip("total_gb", "wrong_master_gb", "the fp32 master weights forgotten: Adam keeps 12 B per parameter, not 8"),
    Slip("total_gb", "wrong_flight_gb", _FLIGHT),
    Slip("total_gb", "wrong_nosp_gb", _NOSP),
)
# GPT-3 175B (Brown et al. 2020, Table 2.1) as Megatron-LM builds it; Korthikanti et al. 2022 train it on TP 8
HIDDEN, LAYERS, HEADS, SEQ, VOCAB = 12288, 96, 96, 2048, 51200
TP, PP, DP, GLOBAL_BATCH = 8, 16, 8, 128  # notebook 17's interview question: 1,024 A100s, 16 micro-batches


def _gpt3():
    return ModelConfig.from_hf_config(dict(model_type="gpt2", n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                                           n_positions=SEQ, vocab_size=VOCAB), name="gpt3-175b")


def values() -> dict:
    """Stage 0 of GPT-3 175B on TP 8 x PP 16 x DP 8, ZeRO-1, selective recompute, with and without sequence
    parallelism (``train_plan``); Mixtral-8x7B's all-to-alls on EP 8 and Llama 3 405B's 8,192-GPU layout
    (Grattafiori et al. 2024, Table 4). Bytes per GPU, shown in GB (1e9) and MB (1e6)."""
    model, gb, mb = _gpt3(), 1e9, 1e6

    def gpt3_plan(sp: bool):
        layout = ParallelLayout(dp=DP, tp=TP, pp=PP, sequence_parallel=sp)
        return train_plan(model, layout, SEQ, 1, GLOBAL_BATCH, strategy="zero1", recompute="selective",
                          dropout=True, flash_attention=False)

    plan, no_sp = gpt3_plan(True), gpt3_plan(False)
    first, states, acts = plan.memory[0], plan.memory[0].states, plan.memory[0].activations
    micro, per_stage = plan.batch.num_microbatches, LAYERS // PP
    layer_act = acts.layers // (per_stage * acts.in_flight)
    plain_layer = no_sp.memory[0].activations.layers // (per_stage * acts.in_flight)
    decoder_tp = [i for i in plan.traffic[0] if i.dim == "tp" and "embedding" not in i.what]
    tp_layer = sum(i.bytes_sent for i in decoder_tp) / per_stage / micro
    one_ar = next(i for i in no_sp.traffic[0] if i.dim == "tp" and i.collective == "all_reduce"
                  and i.phase == "forward" and "embedding" not in i.what)  # after one block, in forward
    n = states.n_params

    mixtral = train_plan("mixtral-8x7b", ParallelLayout(dp=8, ep=8), 4096, 1, 16, strategy="zero1",
                         recompute="selective")
    ep_items = [i for i in mixtral.traffic[0] if i.dim == "ep"]
    visits = mixtral.model.num_hidden_layers * mixtral.batch.num_microbatches  # (MoE layer, micro-batch) pairs
    ep_layer = sum(i.bytes_sent for i in ep_items) / visits

    llama_dp, llama_seq = 64, 8192
    llama = train_plan("llama-3.1-405b", ParallelLayout(dp=llama_dp, tp=TP, pp=PP, sequence_parallel=True),
                       llama_seq, 1, 32 * llama_dp, strategy="fsdp_shard_grad_op", recompute="none")
    return {
        "hidden": HIDDEN, "n_layers": LAYERS, "heads": HEADS, "seq": SEQ, "tp": TP, "pp": PP, "dp": DP,
        "gpus": plan.layout.world_size, "gb": GLOBAL_BATCH, "m": micro, "layers_here": per_stage, "n_params": n,
        "params_gb": states.params / gb, "grads_gb": states.grads / gb, "opt_gb": states.optimizer_states / gb,
        "states_gb": states.total / gb, "sp_layer_mb": layer_act / mb, "emb_mb": acts.embedding / mb,
        "act_gb": acts.total / gb, "total_gb": first.total / gb,
        "tp_ar4_mb": 4 * one_ar.bytes_per_call / mb, "tp_layer_mb": tp_layer / mb,
        "wrong_grads_gb": (first.total - states.grads + states.grads / DP) / gb,
        "wrong_master_gb": (first.total - states.optimizer_states + 8 * n / DP) / gb,
        "wrong_flight_gb": (first.total - acts.total + (acts.layers + acts.embedding) / acts.in_flight) / gb,
        "wrong_flight_act_gb": (acts.total - acts.layers - acts.embedding
                                + (acts.layers + acts.embedding) / acts.in_flight) / gb,
        "wrong_nosp_act_gb": no_sp.memory[0].activations.total / gb,
        "tp_only_mb": plain_layer / mb, "sp_ratio": plain_layer / layer_act,
        "wrong_nosp_gb": no_sp.memory[0].total / gb, "tp_once_mb": one_ar.bytes_per_call / mb,
        "ep": mixtral.layout.ep, "ep_tokens": mixtral.batch.seq_len * mixtral.batch.micro_batch,
        "ep_layer_mb": ep_layer / mb, "ep_once_mb": ep_layer / sum(i.count for i in ep_items) * visits / mb,
        "llama_dp": llama_dp, "llama_seq": llama_seq, "llama_gpus": llama.layout.world_size,
        "llama_stage": llama.busiest, "llama_gb": llama.memory[llama.busiest].total / gb,
    }
