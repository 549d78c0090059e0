"""Card 12 (Fused LayerNorm forward in Triton): the values its text uses."""

from __future__ import annotations

from ringlab.calc import layernorm_cost, roofline


def values() -> dict:
    rows, cols, hw = 8192, 4096, "h100-sxm"
    flops, nbytes = layernorm_cost(rows, cols)
    fused = roofline(flops, nbytes, hw)
    # The eager torch sequence of notebook 12 (mean, x - mean, (xc * xc).mean, rsqrt, *, *, +) makes
    # 12 passes over the N x D tensor where the fused kernel makes 2: ten more, with the same small vectors.
    unfused = roofline(flops, nbytes + 10 * rows * cols * 2, hw)
    d, block = 5000, 1024
    pow2 = 1 << (d - 1).bit_length()
    loops = -(-d // block)
    rows_per_program = 4
    return {
        "rows": rows, "cols": cols, "hw": hw, "flops": flops, "bytes": nbytes, "ai": fused.intensity,
        "ridge": fused.ridge_point, "fused_us": fused.time_s * 1e6, "unfused_bytes": int(unfused.bytes_moved),
        "unfused_us": unfused.time_s * 1e6, "speedup": unfused.time_s / fused.time_s,
        "d": d, "pow2": pow2, "masked": pow2 - d, "masked_frac": (pow2 - d) / pow2,
        "block": block, "loops": loops, "tail": d - (loops - 1) * block, "tail_masked": loops * block - d,
        "rpp": rows_per_program, "wb_row": 2 * cols * 2, "wb_prog": 2 * cols * 2 // rows_per_program,
    }
