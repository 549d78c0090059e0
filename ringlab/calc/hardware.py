"""Accelerator presets from the vendors' datasheets, with dense and sparse peaks kept apart.

API
---
``Hardware``                      frozen dataclass, one accelerator (one GPU / one TPU chip)
``HARDWARE[name]``                presets: a100-sxm-40gb, a100-sxm-80gb, a100-pcie-40gb, a100-pcie-80gb,
                                  h100-sxm, h100-pcie, h100-nvl, h200, gh200, b200, gb200, gb300, mi300x,
                                  mi325x, mi355x, l4, l40s, t4, rtx-4090, tpu-v5e, tpu-v5p, tpu-v6e
``get_hardware(name_or_obj)``     preset by name (case-insensitive) or a ``Hardware`` passed through;
                                  ValueError listing close matches for an unknown name
``peak_flops(hw, dtype, sparse=False)``  peak FLOP/s (float) for a dtype; dense unless sparse=True

Units and conventions
---------------------
- ``tflops_*`` are TFLOP/s (1e12 FLOP/s) of the matrix units, **dense** (no 2:4 sparsity).
  NVIDIA's datasheets print the sparse figure with an asterisk ("* with sparsity"); the dense
  figure is half of it. Sparse figures live only in the ``*_sparse`` fields.
- ``tflops_fp32`` is plain (non-tensor-core) FP32, not TF32; ``tflops_tf32`` is the tensor-core
  TF32 rate (what ``torch.backends.cuda.matmul.allow_tf32`` and ``dtype="tf32"`` use), dense,
  with ``tflops_tf32_sparse`` beside it; ``tflops_fp4`` / ``_sparse`` are FP4 (NVFP4 / MXFP4).
- ``tflops_int8`` is dense TOPS.
- ``hbm_bandwidth`` is bytes/s (2.039e12 = 2.039 TB/s); ``memory`` is bytes as the datasheet
  states it in decimal GB (80 GB -> 80e9). HBM stacks are physically binary, so the device often
  reports more (an A100 80GB shows 81,920 MiB = 85.9e9 B in nvidia-smi): using the datasheet's
  decimal figure errs on the safe side for capacity estimates.
- ``interconnect_bandwidth`` is bytes/s **per direction** of the scale-up link of one chip
  (NVLink totals are quoted bidirectional: 900 GB/s NVLink 4 = 450e9 B/s each way), None where
  the vendor does not say which it is.
- ``host_link_bandwidth`` is bytes/s **per direction** of the chip's link to its host CPU's memory (what
  a KV-cache swap or a CPU offload crosses), the link's nominal rate: PCIe Gen3 / Gen4 / Gen5 x16 =
  16 / 32 / 64 GB/s each way (the datasheets' 32 / 64 / 128 GB/s are both directions added), GH200's
  NVLink-C2C 450 GB/s each way (900 GB/s bidirectional). Pinned-memory copies reach about 80 % of a
  PCIe link's nominal rate (about 25 GB/s on Gen4, 50 GB/s on Gen5), so times computed from it are lower
  bounds, like every roofline here. ``host_link`` names the link; None where the vendor publishes none.
- ``None`` means the chip has no such mode (T4 has no bf16; A100 has no fp8).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ringlab.calc.units import canonical_dtype


@dataclass(frozen=True)
class Hardware:
    """One accelerator. Throughputs in TFLOP/s (dense unless the field name says sparse),
    ``hbm_bandwidth`` in bytes/s, ``memory`` in bytes, ``interconnect_bandwidth`` and
    ``host_link_bandwidth`` (to the host CPU's memory, nominal) in bytes/s per direction. ``source`` names
    the datasheet; ``notes`` explains gaps and conventions."""

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
    tflops_tf32: float | None = None
    tflops_tf32_sparse: float | None = None
    tflops_fp4: float | None = None
    tflops_fp4_sparse: float | None = None
    host_link: str = ""
    host_link_bandwidth: float | None = None

    def __post_init__(self) -> None:
        if self.hbm_bandwidth <= 0 or self.memory <= 0:
            raise ValueError(f"{self.name}: hbm_bandwidth and memory must be positive")


def _chip(name, bf16, fp8, fp32, int8, bw_tb_s, mem_gb, interconnect, link_gb_s, source, notes="",
            tf32=None, fp4=None, host=None):
    """A GPU preset. ``bf16``, ``fp8``, ``tf32`` and ``fp4`` are (dense, sparse) TFLOP/s pairs (NVIDIA
    prints the sparse one, dense is half of it, rounded as NVIDIA rounds it; AMD prints both; None
    where the datasheet gives no sparse rate); fp16 tensor throughput equals bf16 on these chips;
    ``int8`` is dense TOPS; ``link_gb_s`` the scale-up link in GB/s per direction; ``host`` the link to the
    host CPU: (description, GB/s per direction, nominal)."""
    fp8_dense, fp8_sparse = fp8 if fp8 else (None, None)
    tf32_dense, tf32_sparse = tf32 if tf32 else (None, None)
    fp4_dense, fp4_sparse = fp4 if fp4 else (None, None)
    return Hardware(
        tflops_tf32=tf32_dense, tflops_tf32_sparse=tf32_sparse, tflops_fp4=fp4_dense, tflops_fp4_sparse=fp4_sparse,
        name=name,
        tflops_bf16=bf16[0], tflops_bf16_sparse=bf16[1], tflops_fp16=bf16[0], tflops_fp16_sparse=bf16[1],
        tflops_fp8=fp8_dense, tflops_fp8_sparse=fp8_sparse, tflops_fp32=fp32, tflops_int8=int8,
        hbm_bandwidth=float(round(bw_tb_s * 1e12)), memory=int(mem_gb * 10**9),
        interconnect=interconnect, interconnect_bandwidth=None if link_gb_s is None else link_gb_s * 1e9,
        source=source, notes=notes,
        host_link=host[0] if host else "", host_link_bandwidth=host[1] * 1e9 if host else None,
    )


_INFINITY_FABRIC_3 = "AMD Infinity Fabric, 7 links x 128 GB/s = 896 GB/s aggregate (bidirectional)"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/)"
# host links, per direction, nominal: 16 lanes x 8 / 16 / 32 GT/s with 128b/130b coding = 15.75 / 31.5 / 63 GB/s,
# which the datasheets round to 16 / 32 / 64
_GEN3 = ("PCIe Gen3 x16, 16 GB/s each way (32 GB/s bidirectional)", 16)
_GEN4 = ("PCIe Gen4 x16, 32 GB/s each way (64 GB/s bidirectional, as the datasheet quotes it)", 32)
_GEN5 = ("PCIe Gen5 x16, 64 GB/s each way (128 GB/s bidirectional, as the datasheet quotes it)", 64)
_C2C_SHARED = ("NVLink-C2C to the Grace CPU, 900 GB/s bidirectional, shared by the superchip's 2 GPUs: "
               "225 GB/s each way per GPU when both move data", 225)

_PRESETS = [
    _chip("a100-sxm-40gb", (312, 624), None, 19.5, 624, 1.555, 40, "NVLink 3, 600 GB/s bidirectional", 300, _A100,
            "HBM2. No fp8.", tf32=(156, 312), host=_GEN4),
    _chip("a100-sxm-80gb", (312, 624), None, 19.5, 624, 2.039, 80, "NVLink 3, 600 GB/s bidirectional", 300, _A100,
            "HBM2e. No fp8.", tf32=(156, 312), host=_GEN4),
    _chip("a100-pcie-80gb", (312, 624), None, 19.5, 624, 1.935, 80,
            "PCIe Gen4 x16 (64 GB/s bidirectional); optional NVLink bridge for 2 GPUs, 600 GB/s", 300, _A100,
            "HBM2e. No fp8. interconnect_bandwidth is the NVLink bridge; over PCIe it is 32 GB/s each way.",
            tf32=(156, 312), host=_GEN4),
    _chip("h100-sxm", (989, 1979), (1979, 3958), 67, 1979, 3.35, 80, "NVLink 4, 900 GB/s bidirectional", 450, _H100,
            "HBM3. Datasheet bf16 1,979 TFLOP/s is with sparsity; dense is 989.", tf32=(494.5, 989), host=_GEN5),
    _chip("h100-pcie", (756, 1513), (1513, 3026), 51, 1513, 2.0, 80,
            "PCIe Gen5 x16 (128 GB/s bidirectional); optional NVLink bridge, 600 GB/s", 300, _H100,
            "HBM2e. Datasheet bf16 1,513 TFLOP/s is with sparsity. interconnect_bandwidth is the NVLink bridge.",
            tf32=(378, 756), host=_GEN5),
    _chip("h100-nvl", (835.5, 1671), (1670.5, 3341), 60, 1670.5, 3.9, 94,
            "NVLink bridge, 600 GB/s bidirectional; PCIe Gen5 x16", 300, _H100,
            "One GPU of the NVL pair: HBM3, 94 GB. Datasheet bf16 1,671 TFLOP/s is with sparsity.", tf32=(417.5, 835),
            host=_GEN5),
    _chip("h200", (989, 1979), (1979, 3958), 67, 1979, 4.8, 141, "NVLink 4, 900 GB/s bidirectional", 450,
            "NVIDIA H200 Tensor Core GPU datasheet, SXM (nvidia.com/en-us/data-center/h200/)",
            "HBM3e. Same compute as h100-sxm; more and faster memory.", tf32=(494.5, 989), host=_GEN5),
    _chip("gh200", (989, 1979), (1979, 3958), 67, 1979, 4.0, 96, "NVLink 4, 900 GB/s bidirectional", 450,
            "NVIDIA GH200 Grace Hopper Superchip datasheet (nvidia.com/en-us/data-center/grace-hopper-superchip/)",
            "The Hopper GPU of GH200 with 96 GB HBM3 at 4 TB/s (the HBM3e version has 144 GB at 4.9 TB/s); "
            "H100 SXM compute. Its host link is NVLink-C2C to the Grace CPU's LPDDR5X, not PCIe.",
            tf32=(494.5, 989), host=("NVLink-C2C to the Grace CPU, 450 GB/s each way (900 GB/s bidirectional)", 450)),
    _chip("b200", (2250, 4500), (4500, 9000), 75, 4500, 8.0, 180, "NVLink 5, 1.8 TB/s bidirectional", 900,
            "NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx/) and DGX B200 datasheet",
            "One GPU of HGX B200 (1,000 W): HBM3e 180 GB; DGX B200 quotes 64 TB/s for 8 GPUs (8 TB/s each), "
            "the HGX page 7.7 TB/s. Datasheet bf16 4.5 PFLOP/s is with sparsity. Also fp4 (9 PFLOP/s dense). "
            "fp32 75 TFLOP/s per the HGX table. Host link: PCIe Gen5 x16 to the x86 host (DGX B200's Xeon "
            "Platinum 8570 is Gen5).", tf32=(1125, 2250), fp4=(9000, 18000), host=_GEN5),
    _chip("mi300x", (1307.4, 2614.9), (2614.9, 5229.8), 163.4, 2614.9, 5.3, 192, _INFINITY_FABRIC_3, 448,
          "AMD Instinct MI300X accelerator data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)",
          "HBM3. AMD quotes dense figures and marks sparse ones separately.", tf32=(653.7, 1307.4), host=_GEN5),
    _chip("l4", (121, 242), (242.5, 485), 30.3, 242.5, 0.3, 24, "PCIe Gen4 x16, 64 GB/s bidirectional", 32,
            "NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4/)",
            "GDDR6. Datasheet bf16 242 TFLOP/s is with sparsity. No NVLink.", tf32=(60, 120), host=_GEN4),
    Hardware(
        name="t4",
        tflops_bf16=None, tflops_bf16_sparse=None, tflops_fp16=65, tflops_fp16_sparse=None,
        tflops_fp8=None, tflops_fp8_sparse=None, tflops_fp32=8.1, tflops_int8=130,
        hbm_bandwidth=320e9, memory=16 * 10**9,
        interconnect="PCIe Gen3 x16, 32 GB/s bidirectional", interconnect_bandwidth=16e9,
        host_link=_GEN3[0], host_link_bandwidth=_GEN3[1] * 1e9,
        source="NVIDIA T4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/tesla-t4/)",
        notes="Turing has no bf16 (and no fp8, no sparsity): tflops_bf16 is None; use fp16 (65 TFLOP/s "
              "mixed precision). Memory is GDDR6 (hbm_bandwidth holds its 320 GB/s).",
    ),
    _chip("rtx-4090", (165.2, 330.4), (330.3, 660.6), 82.6, 660.6, 1.008, 24, "PCIe Gen4 x16, 64 GB/s bidirectional; no NVLink",
            32, "NVIDIA Ada Lovelace GPU architecture whitepaper v2.1, appendix table (GeForce RTX 4090)",
            "GDDR6X. Tensor figures with FP32 accumulate (what training uses); with FP16 accumulate the "
            "whitepaper gives fp16 330.3 and fp8 660.6 dense.", tf32=(82.6, 165.2), host=_GEN4),
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
    Hardware(
        name="tpu-v6e",
        tflops_bf16=918, tflops_bf16_sparse=None, tflops_fp16=None, tflops_fp16_sparse=None,
        tflops_fp8=None, tflops_fp8_sparse=None, tflops_fp32=None, tflops_int8=1836,
        hbm_bandwidth=1640e9, memory=32 * 10**9,
        interconnect="ICI, 3,584 Gbps per chip (2D torus)", interconnect_bandwidth=None,
        source="Google Cloud TPU v6e (Trillium) documentation, system architecture (cloud.google.com/tpu/docs/v6e)",
        notes="One chip. 32 GB HBM at 1,640 GB/s; int8 1,836 TOPS; no fp16/fp8 peak published.",
    ),
    _chip("a100-pcie-40gb", (312, 624), None, 19.5, 624, 1.555, 40,
            "PCIe Gen4 x16 (64 GB/s bidirectional); optional NVLink bridge for 2 GPUs, 600 GB/s", 300, _A100,
            "HBM2, 1,555 GB/s (the 80GB PCIe card has 1,935). interconnect_bandwidth is the NVLink bridge.",
            tf32=(156, 312), host=_GEN4),
    _chip("gb200", (2500, 5000), (5000, 10000), 80, 5000, 8.0, 186, "NVLink 5, 1.8 TB/s bidirectional", 900,
            "NVIDIA GB200 NVL72 datasheet (nvidia.com/en-us/data-center/gb200-nvl72/): per GB200 superchip "
            "(1 Grace + 2 Blackwell GPUs) FP4 40 PF, FP8 20 PF, FP16/BF16 10 PF, TF32 5 PF (with sparsity), "
            "FP32 160 TF, 372 GB HBM3e at 16 TB/s",
            "One Blackwell GPU of GB200 NVL72 = half a superchip: 186 GB, 8 TB/s. Datasheet tensor figures "
            "are with sparsity; dense is half.", tf32=(1250, 2500), fp4=(10000, 20000), host=_C2C_SHARED),
    _chip("gb300", (2500, 5000), (5000, 10000), 75, 319.4, 8.0, 288,
            "NVLink 5, 1.8 TB/s bidirectional", 900,
            "NVIDIA GB300 NVL72 datasheet (nvidia.com/en-us/data-center/gb300-nvl72/): 72 Blackwell Ultra "
            "GPUs, FP4 1,440 PF with sparsity / 1,080 PF without, FP8 720 PF, FP16/BF16 360 PF, TF32 180 PF "
            "(with sparsity), INT8 23 POPS, up to 20 TB HBM3e at 576 TB/s",
            "Per GPU = NVL72 figure / 72: 288 GB HBM3e, 8 TB/s. Blackwell Ultra raises dense FP4 to 15 PF and "
            "cuts INT8 to 23 POPS / 72 = 319.4 TOPS (tflops_int8 holds NVIDIA's figure as listed). FP32 75 TF.",
            tf32=(1250, 2500), fp4=(15000, 20000), host=_C2C_SHARED),
    _chip("mi325x", (1307.4, 2614.9), (2614.9, 5229.8), 163.4, 2614.9, 6.0, 256, _INFINITY_FABRIC_3, 448,
          "AMD Instinct MI325X accelerator data sheet (amd.com/en/products/accelerators/instinct/mi300/mi325x.html)",
          "HBM3E 256 GB at 6 TB/s; same CDNA 3 compute as mi300x. Dense figures; sparse marked separately.",
          tf32=(653.7, 1307.4), host=_GEN5),
    _chip("mi355x", (2516.6, 5033.2), (5033.2, 10066.4), 157.3, 5033.2, 8.0, 288,
          "AMD Infinity Fabric, 7 links x 153.6 GB/s = 1,075 GB/s aggregate (bidirectional)", 537.6,
          "AMD Instinct MI355X accelerator data sheet (amd.com/en/products/accelerators/instinct/mi350/mi355x.html)",
          "CDNA 4, HBM3E 288 GB at 8 TB/s. MXFP4/MXFP6 10.1 PF dense (no sparse figure). The data sheet gives "
          "no TF32 matrix rate (CDNA 4 drops it).", fp4=(10066.4, None), host=_GEN5),
    _chip("l40s", (362.05, 733), (733, 1466), 91.6, 733, 0.864, 48, "PCIe Gen4 x16, 64 GB/s bidirectional; no NVLink",
            32, "NVIDIA L40S GPU datasheet (nvidia.com/en-us/data-center/l40s/)",
            "GDDR6 48 GB at 864 GB/s (hbm_bandwidth holds it). Datasheet tensor figures are with sparsity.",
            tf32=(183, 366), host=_GEN4),
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
    """Peak FLOP/s of ``hw`` for matrix math in ``dtype`` (fp32, tf32, fp16, bf16, fp8, fp4, int8 -> OP/s).

    ``fp32`` is the plain (non-tensor-core) rate, ``tf32`` the tensor-core TF32 rate. Dense unless
    ``sparse=True`` (2:4 structured sparsity, where the datasheet gives it: tf32/bf16/fp16/fp8/fp4).
    Raises ValueError when the chip has no such mode (e.g. bf16 on a T4, fp8 on an A100, sparse
    fp32, tf32 on a TPU), naming the modes it does have.
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
