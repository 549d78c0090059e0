import dataclasses

import pytest

from ringlab.calc.hardware import HARDWARE, Hardware, get_hardware, peak_flops

REQUIRED = ["a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie", "h100-nvl", "h200",
            "b200", "mi300x", "l4", "t4", "rtx-4090", "tpu-v5e", "tpu-v5p"]


def test_all_required_presets_exist_with_sources():
    for name in REQUIRED:
        hw = HARDWARE[name]
        assert hw.name == name and hw.source and hw.hbm_bandwidth > 0 and hw.memory > 0


def test_datasheet_values_that_interview_answers_rely_on():
    a100 = HARDWARE["a100-sxm-80gb"]
    assert peak_flops(a100, "bf16") == 312e12 and a100.hbm_bandwidth == 2.039e12 and a100.memory == 80 * 10**9
    assert HARDWARE["a100-sxm-40gb"].hbm_bandwidth == 1.555e12
    h100 = HARDWARE["h100-sxm"]
    assert h100.tflops_bf16 == 989 and h100.tflops_bf16_sparse == 1979
    assert h100.hbm_bandwidth == 3.35e12 and h100.memory == 80 * 10**9
    # P3: ridge point of the A100 80GB is 153 FLOP/B
    assert round(peak_flops(a100, "bf16") / a100.hbm_bandwidth) == 153


def test_dense_is_default_and_sparse_is_opt_in():
    assert peak_flops("h100-sxm", "bf16") == 989e12
    assert peak_flops("h100-sxm", "bf16", sparse=True) == 1979e12
    for hw in HARDWARE.values():
        if hw.tflops_bf16 and hw.tflops_bf16_sparse:
            assert hw.tflops_bf16_sparse >= 1.99 * hw.tflops_bf16  # sparse never stored as dense


def test_missing_modes_raise_clearly():
    t4 = HARDWARE["t4"]
    assert t4.tflops_bf16 is None and "bf16" in t4.notes
    with pytest.raises(ValueError, match="t4 has no published bf16"):
        peak_flops("t4", "bf16")
    assert peak_flops("t4", "fp16") == 65e12
    with pytest.raises(ValueError, match="fp8"):
        peak_flops("a100-sxm-80gb", "fp8")
    with pytest.raises(ValueError, match="sparse"):
        peak_flops("tpu-v5p", "bf16", sparse=True)
    with pytest.raises(ValueError, match="unknown dtype"):
        peak_flops("h100-sxm", "fp7")


def test_get_hardware_names_and_objects():
    assert get_hardware("H100_SXM") is HARDWARE["h100-sxm"]
    custom = dataclasses.replace(HARDWARE["h100-sxm"], name="mine", hbm_bandwidth=1e12)
    assert get_hardware(custom) is custom
    with pytest.raises(ValueError, match="Close matches: .*h100-sxm"):
        get_hardware("h100-sx")
    with pytest.raises(TypeError):
        get_hardware(42)


def test_hardware_is_frozen_and_validated():
    with pytest.raises(dataclasses.FrozenInstanceError):
        HARDWARE["l4"].memory = 1
    with pytest.raises(ValueError):
        dataclasses.replace(HARDWARE["l4"], memory=0)
    assert isinstance(HARDWARE["l4"], Hardware)


# Datasheet figures of the chips added for issue 19: (bf16 dense, bf16 sparse, fp8 dense, tf32 dense,
# fp4 dense, memory GB, HBM TB/s). Sources: NVIDIA GB200 / GB300 NVL72, L40S and A100 datasheets (per
# GPU: NVL72 figures / 72), AMD MI325X / MI355X data sheets, Google Cloud TPU v6e docs.
NEW_CHIPS = {
    "gb200": (2500, 5000, 5000, 1250, 10000, 186, 8.0),
    "gb300": (2500, 5000, 5000, 1250, 15000, 288, 8.0),
    "mi325x": (1307.4, 2614.9, 2614.9, 653.7, None, 256, 6.0),
    "mi355x": (2516.6, 5033.2, 5033.2, None, 10066.4, 288, 8.0),
    "l40s": (362.05, 733, 733, 183, None, 48, 0.864),
    "tpu-v6e": (918, None, None, None, None, 32, 1.64),
    "a100-pcie-40gb": (312, 624, None, 156, None, 40, 1.555),
}


@pytest.mark.parametrize("name", sorted(NEW_CHIPS))
def test_new_chip_presets(name):
    bf16, bf16_sparse, fp8, tf32, fp4, mem_gb, tb_s = NEW_CHIPS[name]
    hw = HARDWARE[name]
    assert (hw.tflops_bf16, hw.tflops_bf16_sparse, hw.tflops_fp8, hw.tflops_tf32, hw.tflops_fp4) == (
        bf16, bf16_sparse, fp8, tf32, fp4)
    assert hw.memory == mem_gb * 10**9 and hw.hbm_bandwidth == pytest.approx(tb_s * 1e12) and hw.source
    if tf32 is None:
        with pytest.raises(ValueError, match="no published tf32"):
            peak_flops(hw, "tf32")


def test_tf32_is_the_tensor_core_rate_and_sparse_doubles_it():
    for hw in HARDWARE.values():
        if hw.tflops_tf32:
            assert hw.tflops_fp32 is None or hw.tflops_tf32 >= hw.tflops_fp32  # equal on the RTX 4090 (Ada)
            assert hw.tflops_tf32_sparse in (None, 2 * hw.tflops_tf32)
        if hw.tflops_fp4 and hw.tflops_fp8:
            assert hw.tflops_fp4 >= 2 * hw.tflops_fp8
    assert peak_flops("h100-sxm", "tf32") == 494.5e12 and peak_flops("h100-sxm", "tf32", sparse=True) == 989e12
    assert peak_flops("b200", "nvfp4") == 9000e12
