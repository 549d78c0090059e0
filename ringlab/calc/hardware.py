"""Accelerator presets from the vendors' datasheets, with dense and sparse peaks kept apart.

API
---
``Hardware``                      frozen dataclass, one accelerator (one GPU / one TPU chip)
``HARDWARE[name]``                presets: a100-sxm-40gb, a100-sxm-80gb, a100-pcie-80gb, h100-sxm,
                                  h100-pcie, h100-nvl, h200, b200, mi300x, l4, t4, rtx-4090,
                                  tpu-v5e, tpu-v5p
``get_hardware(name_or_obj)``     preset by name (case-insensitive) or a ``Hardware`` passed through;
                                  ValueError listing close matches for an unknown name
``peak_flops(hw, dtype, sparse=False)``  peak FLOP/s (float) for a dtype; dense unless sparse=True

Units and conventions
---------------------
- ``tflops_*`` are TFLOP/s (1e12 FLOP/s) of the matrix units, **dense** (no 2:4 sparsity).
  NVIDIA's datasheets print the sparse figure with an asterisk ("* with sparsity"); the dense
  figure is half of it. Sparse figures live only in the ``*_sparse`` fields.
- ``tflops_fp32`` is plain (non-tensor-core) FP32, not TF32.
- ``tflops_int8`` is dense TOPS.
- ``hbm_bandwidth`` is bytes/s (2.039e12 = 2.039 TB/s); ``memory`` is bytes as the datasheet
  states it in decimal GB (80 GB -> 80e9). HBM stacks are physically binary, so the device often
  reports more (an A100 80GB shows 81,920 MiB = 85.9e9 B in nvidia-smi): using the datasheet's
  decimal figure errs on the safe side for capacity estimates.
- ``interconnect_bandwidth`` is bytes/s **per direction** of the scale-up link of one chip
  (NVLink totals are quoted bidirectional: 900 GB/s NVLink 4 = 450e9 B/s each way), None where
  the vendor does not say which it is.
- ``None`` means the chip has no such mode (T4 has no bf16; A100 has no fp8).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ringlab.calc.units import canonical_dtype


@dataclass(frozen=True)
class Hardware:
    """One accelerator. Throughputs in TFLOP/s (dense unless the field name says sparse),
    ``hbm_bandwidth`` in bytes/s, ``memory`` in bytes, ``interconnect_bandwidth`` in bytes/s per
    direction. ``source`` names the datasheet; ``notes`` explains gaps and conventions."""

    name: str
    tflops_bf16: float | None
    tflops_bf16_sparse: float | None
    tflops_fp16: float | None
    tflops_fp16_sparse: float | None
    tflops_fp8: float | None
    tflops_fp8_sparse: float | None
    tflops_fp32: float | None
    tflops_int8: float | None
    hbm_bandwidth: float
    memory: int
    interconnect: str
    interconnect_bandwidth: float | None
    source: str
    notes: str = ""

    def __post_init__(self) -> None:
        if self.hbm_bandwidth <= 0 or self.memory <= 0:
            raise ValueError(f"{self.name}: hbm_bandwidth and memory must be positive")


def _nvidia(name, bf16, fp8, fp32, int8, bw_tb_s, mem_gb, interconnect, link_gb_s, source, notes=""):
    """An NVIDIA preset. ``bf16`` and ``fp8`` are (dense, sparse) TFLOP/s pairs as printed (the
    datasheet prints the sparse one; dense is half of it, rounded as NVIDIA rounds it), fp16
    tensor throughput equals bf16 on these chips; ``int8`` is dense TOPS."""
    fp8_dense, fp8_sparse = fp8 if fp8 else (None, None)
    return Hardware(
        name=name,
        tflops_bf16=bf16[0], tflops_bf16_sparse=bf16[1], tflops_fp16=bf16[0], tflops_fp16_sparse=bf16[1],
        tflops_fp8=fp8_dense, tflops_fp8_sparse=fp8_sparse, tflops_fp32=fp32, tflops_int8=int8,
        hbm_bandwidth=float(round(bw_tb_s * 1e12)), memory=int(mem_gb * 10**9),
        interconnect=interconnect, interconnect_bandwidth=None if link_gb_s is None else link_gb_s * 1e9,
        source=source, notes=notes,
    )


_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/)"

_PRESETS = [
    _nvidia("a100-sxm-40gb", (312, 624), None, 19.5, 624, 1.555, 40, "NVLink 3, 600 GB/s bidirectional", 300, _A100,
            "HBM2. No fp8. TF32 tensor: 156 TFLOP/s."),
    _nvidia("a100-sxm-80gb", (312, 624), None, 19.5, 624, 2.039, 80, "NVLink 3, 600 GB/s bidirectional", 300, _A100,
            "HBM2e. No fp8. TF32 tensor: 156 TFLOP/s."),
    _nvidia("a100-pcie-80gb", (312, 624), None, 19.5, 624, 1.935, 80,
            "PCIe Gen4 x16 (64 GB/s bidirectional); optional NVLink bridge for 2 GPUs, 600 GB/s", 300, _A100,
            "HBM2e. No fp8. interconnect_bandwidth is the NVLink bridge; over PCIe it is 32 GB/s each way."),
    _nvidia("h100-sxm", (989, 1979), (1979, 3958), 67, 1979, 3.35, 80, "NVLink 4, 900 GB/s bidirectional", 450, _H100,
            "HBM3. Datasheet bf16 1,979 TFLOP/s is with sparsity; dense is 989."),
    _nvidia("h100-pcie", (756, 1513), (1513, 3026), 51, 1513, 2.0, 80,
            "PCIe Gen5 x16 (128 GB/s bidirectional); optional NVLink bridge, 600 GB/s", 300, _H100,
            "HBM2e. Datasheet bf16 1,513 TFLOP/s is with sparsity. interconnect_bandwidth is the NVLink bridge."),
    _nvidia("h100-nvl", (835.5, 1671), (1670.5, 3341), 60, 1670.5, 3.9, 94,
            "NVLink bridge, 600 GB/s bidirectional; PCIe Gen5 x16", 300, _H100,
            "One GPU of the NVL pair: HBM3, 94 GB. Datasheet bf16 1,671 TFLOP/s is with sparsity."),
    _nvidia("h200", (989, 1979), (1979, 3958), 67, 1979, 4.8, 141, "NVLink 4, 900 GB/s bidirectional", 450,
            "NVIDIA H200 Tensor Core GPU datasheet, SXM (nvidia.com/en-us/data-center/h200/)",
            "HBM3e. Same compute as h100-sxm; more and faster memory."),
    _nvidia("b200", (2250, 4500), (4500, 9000), 75, 4500, 8.0, 180, "NVLink 5, 1.8 TB/s bidirectional", 900,
            "NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx/) and DGX B200 datasheet",
            "One GPU of HGX B200 (1,000 W): HBM3e 180 GB; DGX B200 quotes 64 TB/s for 8 GPUs (8 TB/s each), "
            "the HGX page 7.7 TB/s. Datasheet bf16 4.5 PFLOP/s is with sparsity. Also fp4 (9 PFLOP/s dense). "
            "fp32 75 TFLOP/s per the HGX table."),
    Hardware(
        name="mi300x",
        tflops_bf16=1307.4, tflops_bf16_sparse=2614.9, tflops_fp16=1307.4, tflops_fp16_sparse=2614.9,
        tflops_fp8=2614.9, tflops_fp8_sparse=5229.8, tflops_fp32=163.4, tflops_int8=2614.9,
        hbm_bandwidth=5.3e12, memory=192 * 10**9,
        interconnect="AMD Infinity Fabric, 7 links x 128 GB/s = 896 GB/s aggregate (bidirectional)",
        interconnect_bandwidth=448e9,
        source="AMD Instinct MI300X accelerator data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)",
        notes="HBM3. AMD quotes dense figures and marks sparse ones separately.",
    ),
    _nvidia("l4", (121, 242), (242.5, 485), 30.3, 242.5, 0.3, 24, "PCIe Gen4 x16, 64 GB/s bidirectional", 32,
            "NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4/)",
            "GDDR6. Datasheet bf16 242 TFLOP/s is with sparsity. No NVLink."),
    Hardware(
        name="t4",
        tflops_bf16=None, tflops_bf16_sparse=None, tflops_fp16=65, tflops_fp16_sparse=None,
        tflops_fp8=None, tflops_fp8_sparse=None, tflops_fp32=8.1, tflops_int8=130,
        hbm_bandwidth=320e9, memory=16 * 10**9,
        interconnect="PCIe Gen3 x16, 32 GB/s bidirectional", interconnect_bandwidth=16e9,
        source="NVIDIA T4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/tesla-t4/)",
        notes="Turing has no bf16 (and no fp8, no sparsity): tflops_bf16 is None; use fp16 (65 TFLOP/s "
              "mixed precision). Memory is GDDR6 (hbm_bandwidth holds its 320 GB/s).",
    ),
    _nvidia("rtx-4090", (165.2, 330.4), (330.3, 660.6), 82.6, 660.6, 1.008, 24, "PCIe Gen4 x16, 64 GB/s bidirectional; no NVLink",
            32, "NVIDIA Ada Lovelace GPU architecture whitepaper v2.1, appendix table (GeForce RTX 4090)",
            "GDDR6X. Tensor figures with FP32 accumulate (what training uses); with FP16 accumulate the "
            "whitepaper gives fp16 330.3 and fp8 660.6 dense."),
    Hardware(
        name="tpu-v5e",
        tflops_bf16=197, tflops_bf16_sparse=None, tflops_fp16=None, tflops_fp16_sparse=None,
        tflops_fp8=None, tflops_fp8_sparse=None, tflops_fp32=None, tflops_int8=394,
        hbm_bandwidth=819e9, memory=16 * 10**9,
        interconnect="ICI, 1,600 Gbps per chip (2D torus)", interconnect_bandwidth=None,
        source="Google Cloud TPU v5e documentation, system architecture (cloud.google.com/tpu/docs/v5e)",
        notes="One chip. bf16 matrix units; int8 394 TOPS; no fp16/fp8 peak published. "
              "Google does not say whether the ICI figure is per direction.",
    ),
    Hardware(
        name="tpu-v5p",
        tflops_bf16=459, tflops_bf16_sparse=None, tflops_fp16=None, tflops_fp16_sparse=None,
        tflops_fp8=None, tflops_fp8_sparse=None, tflops_fp32=None, tflops_int8=918,
        hbm_bandwidth=2765e9, memory=95 * 10**9,
        interconnect="ICI, 4,800 Gbps per chip (3D torus)", interconnect_bandwidth=None,
        source="Google Cloud TPU v5p documentation, system architecture (cloud.google.com/tpu/docs/v5p)",
        notes="One chip. HBM2e. int8 918 TOPS; no fp16/fp8 peak published.",
    ),
]

HARDWARE: dict[str, Hardware] = {hw.name: hw for hw in _PRESETS}


def get_hardware(name_or_obj: str | Hardware) -> Hardware:
    """Return the ``Hardware`` preset named ``name_or_obj`` (case-insensitive, '_' or ' ' may stand
    for '-'), or ``name_or_obj`` itself if it already is a ``Hardware``.

    Raises ValueError naming close matches and all presets for an unknown name, TypeError otherwise.
    """
    if isinstance(name_or_obj, Hardware):
        return name_or_obj
    if not isinstance(name_or_obj, str):
        raise TypeError(f"hardware must be a preset name or a Hardware, got {type(name_or_obj).__name__}")
    key = name_or_obj.strip().lower().replace("_", "-").replace(" ", "-")
    if key in HARDWARE:
        return HARDWARE[key]
    close = difflib.get_close_matches(key, list(HARDWARE), n=3, cutoff=0.5)
    hint = f" Close matches: {', '.join(close)}." if close else ""
    raise ValueError(f"unknown hardware {name_or_obj!r}.{hint} Presets: {', '.join(HARDWARE)}")


def peak_flops(hw: str | Hardware, dtype: str = "bf16", sparse: bool = False) -> float:
    """Peak FLOP/s of ``hw`` for matrix math in ``dtype`` (fp32, fp16, bf16, fp8, int8 -> OP/s).

    Dense unless ``sparse=True`` (2:4 structured sparsity, only for bf16/fp16/fp8). Raises
    ValueError when the chip has no such mode (e.g. bf16 on a T4, fp8 on an A100, sparse fp32),
    naming the modes it does have.
    """
    hw = get_hardware(hw)
    key = canonical_dtype(dtype)
    field = f"tflops_{key}" + ("_sparse" if sparse else "")
    value = getattr(hw, field, None)
    if value is None:
        have = [f.removeprefix("tflops_") for f in vars(hw) if f.startswith("tflops_") and getattr(hw, f)]
        kind = "sparse " if sparse else ""
        raise ValueError(
            f"{hw.name} has no published {kind}{key} peak ({hw.notes or 'not in the datasheet'}). "
            f"Available: {', '.join(have)}"
        )
    return float(value) * 1e12
