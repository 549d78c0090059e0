"""Capacity calculators: hardware and model presets (per-layer models read from HF config.json),
communication volume, KV cache, roofline, decode batching and pipeline bubbles. Imports numpy and the
pure formulas of ``ringlab.collectives`` (busbw)."""

from ringlab.calc.comm import (
    STRATEGIES,
    CollectiveCall,
    GradComm,
    ModelStates,
    bus_bandwidth,
    grad_comm_bytes,
    ring_bytes_per_rank,
)
from ringlab.calc.hardware import HARDWARE, Hardware, get_hardware, peak_flops
from ringlab.calc.kvcache import (
    kv_cache_by_layer_kind, kv_cache_bytes, kv_cache_bytes_per_token, kv_heads_per_rank, max_cached_tokens,
)
from ringlab.calc.layers import LayerSpec
from ringlab.calc.models import MODELS, ModelConfig, get_model
from ringlab.calc.units import DTYPE_BYTES, GB, GiB, canonical_dtype, dtype_bytes, format_bytes, format_flops, parse_count, parse_size

__all__ = [
    "DTYPE_BYTES", "GB", "GiB", "canonical_dtype", "dtype_bytes", "format_bytes", "format_flops", "parse_count", "parse_size",
    "HARDWARE", "Hardware", "get_hardware", "peak_flops",
    "MODELS", "ModelConfig", "LayerSpec", "get_model",
    "kv_cache_by_layer_kind", "kv_cache_bytes", "kv_cache_bytes_per_token", "kv_heads_per_rank", "max_cached_tokens",
    "STRATEGIES", "CollectiveCall", "GradComm", "ModelStates", "bus_bandwidth", "grad_comm_bytes",
    "ring_bytes_per_rank",
]

# Calculators II (issue 7: roofline, decode, pipeline) append their imports below this line.
from ringlab.calc.decode import DecodeStep, SlaResult, decode_step, max_batch_for_sla, naive_linear_decode_time
from ringlab.calc.pipeline import PipelineSchedule, bubble_fraction, bubble_time, peak_in_flight, pipeline_schedule
from ringlab.calc.roofline import (
    RooflineResult, attention_decode_cost, elementwise_cost, layernorm_cost, matmul_cost, roofline,
)

__all__ += [
    "RooflineResult", "roofline", "matmul_cost", "elementwise_cost", "layernorm_cost", "attention_decode_cost",
    "DecodeStep", "SlaResult", "decode_step", "max_batch_for_sla", "naive_linear_decode_time",
    "PipelineSchedule", "bubble_fraction", "bubble_time", "peak_in_flight", "pipeline_schedule",
]
