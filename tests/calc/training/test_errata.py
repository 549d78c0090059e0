"""The ringlab values quoted in docs/training_errata.md, one test per row."""

import pytest
from training_models import gpt

from ringlab.calc import MODELS
from ringlab.calc.training.activations import layer_activation_bytes
from ringlab.calc.training.flops import layer_flops
from ringlab.calc.training.layout import ParallelLayout
from ringlab.calc.training.memory import Precision, layer_params_per_gpu, sharded_state_bytes


def test_row_1_fp32_master_weights_counted():
    n = MODELS["llama-2-7b"].param_count()
    assert sum(sharded_state_bytes(n, 1, "ddp", Precision())) / 1e9 == pytest.approx(107.81, abs=0.005)
    assert sum(sharded_state_bytes(n, 1, "ddp", Precision(master_weights=False))) / 1e9 == pytest.approx(80.86, abs=0.005)


def test_rows_2_and_3_zero1_keeps_whole_gradients():
    assert sum(sharded_state_bytes(7.5e9, 64, "zero1", Precision())) / 1e9 == pytest.approx(31.41, abs=0.005)
    assert sum(sharded_state_bytes(7.5e9, 64, "zero2", Precision())) / 1e9 == pytest.approx(16.64, abs=0.005)
    assert sharded_state_bytes(10**9, 8, "zero1", Precision())[1] == 2 * 10**9
    assert sharded_state_bytes(10**9, 8, "zero2", Precision())[1] == 2 * 10**9 // 8


def test_row_4_norms_replicated_over_tp():
    m = MODELS["llama-2-7b"]
    h, f = 4096, 11008
    dense, _ = layer_params_per_gpu(m, m.layers[0], ParallelLayout(tp=8))
    assert dense - (4 * h * h + 3 * h * f) // 8 == 2 * h


def test_row_5_expert_activations_not_divided_by_ep():
    m = MODELS["mixtral-8x7b"]
    one = dict(recompute="selective", dropout=False, flash_attention=True)
    ep8 = layer_activation_bytes(m, m.layers[0], 4096, 1, ParallelLayout(dp=8, ep=8), **one).total
    ep1 = layer_activation_bytes(m, m.layers[0], 4096, 1, ParallelLayout(dp=8), **one).total
    assert ep8 == ep1 and ep8 / 1e6 == pytest.approx(990.38, abs=0.005)


def test_row_6_selective_recompute_for_gpt3():
    m = gpt(12288, 96, 96)
    lay = ParallelLayout(tp=8, sequence_parallel=True)
    none = layer_activation_bytes(m, m.layers[0], 2048, 1, lay).total
    selective = layer_activation_bytes(m, m.layers[0], 2048, 1, lay, "selective").total
    assert 1 - selective / none == pytest.approx(0.702, abs=5e-4)
    f = layer_flops(m, m.layers[0], 2048)
    assert f.attention / f.forward == pytest.approx(0.0270, abs=5e-5)
    assert f.attention / (f.forward + f.backward) == pytest.approx(0.0090, abs=5e-5)


def test_convention_megatron_18_bytes_per_param():
    assert sum(sharded_state_bytes(10**9, 1, "ddp", Precision(grad_dtype="fp32"))) == 18 * 10**9
