"""Activation bytes of a GPT layer measured in torch (every tensor autograd saves for backward) against
ringlab's tensor-by-tensor count: the eager layer of Korthikanti et al. 2022 without dropout, and with
PyTorch's fused attention (scaled_dot_product_attention), which keeps a log-sum-exp instead of the scores."""

import pytest
from training_models import gpt

from ringlab.calc.training.activations import layer_activation_bytes

torch = pytest.importorskip("torch")
F = torch.nn.functional

H, HEADS, SEQ, BATCH = 256, 4, 128, 2


def _saved_bytes(fused: bool) -> tuple[int, int]:
    """(bytes of the distinct non-parameter storages autograd saves for one layer's forward, LayerNorm
    statistics among them)."""
    torch.manual_seed(0)
    dt, h, a, s, b = torch.bfloat16, H, HEADS, SEQ, BATCH
    shapes = dict(ln1_w=(h,), ln1_b=(h,), qkv_w=(3 * h, h), qkv_b=(3 * h,), o_w=(h, h), o_b=(h,), ln2_w=(h,),
                  ln2_b=(h,), fc1_w=(4 * h, h), fc1_b=(4 * h,), fc2_w=(h, 4 * h), fc2_b=(h,))
    p = {name: torch.randn(*shape, dtype=dt, requires_grad=True) for name, shape in shapes.items()}
    params = {t.untyped_storage().data_ptr() for t in p.values()}
    saved, stats = {}, {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
            if t.dim() == 3 and t.shape[-1] == 1:  # LayerNorm's mean and 1/std per token
                stats[storage.data_ptr()] = storage.nbytes()
        return t

    x = torch.randn(s, b, h, dtype=dt, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = F.layer_norm(x, (h,), p["ln1_w"], p["ln1_b"])
        q, k, v = (t.permute(1, 2, 0, 3) for t in F.linear(y, p["qkv_w"], p["qkv_b"]).view(s, b, a, 3 * h // a)
                   .chunk(3, dim=-1))  # (b, a, s, d) views of the QKV output
        if fused:
            ctx = F.scaled_dot_product_attention(q, k, v)
        else:
            ctx = torch.matmul(F.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1), v)
        x2 = x + F.linear(ctx.permute(2, 0, 1, 3).reshape(s, b, h), p["o_w"], p["o_b"])
        z = F.layer_norm(x2, (h,), p["ln2_w"], p["ln2_b"])
        x2 + F.linear(F.gelu(F.linear(z, p["fc1_w"], p["fc1_b"])), p["fc2_w"], p["fc2_b"])
    return sum(saved.values()), sum(stats.values())


def test_eager_layer_without_dropout_is_32sbh_plus_2as2b():
    measured, stats = _saved_bytes(fused=False)
    m = gpt(H, 1, HEADS)
    ours = layer_activation_bytes(m, m.layers[0], SEQ, BATCH, dropout=False).total
    assert ours == SEQ * BATCH * H * 32 + 2 * HEADS * SEQ * SEQ * BATCH
    assert stats == 4 * SEQ * BATCH * 2  # 2 LayerNorms x (mean, rstd) per token, not in the paper's count
    assert measured - stats == ours


def test_fused_attention_keeps_a_log_sum_exp_instead_of_the_scores():
    measured, stats = _saved_bytes(fused=True)
    m = gpt(H, 1, HEADS)
    ours = layer_activation_bytes(m, m.layers[0], SEQ, BATCH, dropout=False, flash_attention=True).total
    # the kernel's saved output is the O projection's input (one storage); the scores are gone
    assert measured - stats == ours
    assert ours == SEQ * BATCH * H * 32 + 4 * HEADS * SEQ * BATCH
