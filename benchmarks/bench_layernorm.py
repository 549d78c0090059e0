"""Fused Triton LayerNorm against torch.nn.functional.layer_norm on one GPU, measured in the same run.

Effective bandwidth = bytes a fused LayerNorm must move / time, with the bytes from
``ringlab.calc.roofline.layernorm_cost`` (x read once, y written once, weight and bias read
once; the 8 bytes per row of mean/rstd the Triton kernel also stores are left out) and the
same byte count for both, so the ratio column is torch time / Triton time. Times are medians
of ``triton.testing.do_bench`` (CUDA events, L2 flushed between runs) and include each call's
Python launch overhead, which dominates for the smallest shapes. Every case is checked
against torch before it is timed.

Usage: python benchmarks/bench_layernorm.py [--rows 4096 16384 65536] [--cols 1024 2048 4096 8192]
       [--dtypes fp16 bf16]. Without a CUDA device it says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys

from ringlab.calc.roofline import layernorm_cost

TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def _gpu_or_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed (pip install 'ringlab[torch,triton]')"
    if not torch.cuda.is_available():
        return "no CUDA device is visible"
    return None


def run(rows: list[int], cols: list[int], dtypes: list[str]) -> list[dict]:
    import torch
    from triton.testing import do_bench

    from ringlab.labs import layernorm

    results = []
    for dtype in dtypes:
        torch_dtype = getattr(torch, TORCH_DTYPES[dtype])
        for n_cols in cols:
            for n_rows in rows:
                gen = torch.Generator(device="cuda").manual_seed(0)
                x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch_dtype, generator=gen)
                weight = torch.randn(n_cols, device="cuda", dtype=torch_dtype, generator=gen)
                bias = torch.randn(n_cols, device="cuda", dtype=torch_dtype, generator=gen)
                ref = torch.nn.functional.layer_norm(x, (n_cols,), weight, bias, 1e-5)
                out = layernorm.layer_norm(x, weight, bias, 1e-5)
                err = ((out.y.float() - ref.float()).abs() / ref.float().abs().clamp(min=1)).max().item()
                del out, ref
                t_triton = do_bench(lambda: layernorm.layer_norm(x, weight, bias, 1e-5), return_mode="median")
                t_torch = do_bench(lambda: torch.nn.functional.layer_norm(x, (n_cols,), weight, bias, 1e-5),
                                   return_mode="median")
                nbytes = layernorm_cost(n_rows, n_cols, dtype)[1]
                results.append({"dtype": dtype, "rows": n_rows, "cols": n_cols, "bytes": nbytes,
                                "triton_ms": t_triton, "torch_ms": t_torch,
                                "triton_GBps": nbytes / t_triton / 1e6, "torch_GBps": nbytes / t_torch / 1e6,
                                "ratio": t_torch / t_triton, "max_scaled_err": err})
        torch.cuda.empty_cache()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[4096, 16384, 65536])
    parser.add_argument("--cols", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--dtypes", nargs="+", choices=sorted(TORCH_DTYPES), default=["fp16", "bf16"])
    args = parser.parse_args(argv)
    reason = _gpu_or_reason()
    if reason is not None:
        print(f"bench_layernorm needs a CUDA GPU: {reason}. Nothing measured.")
        return 0
    from ringlab.labs import layernorm

    if layernorm.INTERPRET:
        print("bench_layernorm: TRITON_INTERPRET is set, so Triton would not compile; unset it to benchmark.")
        return 0
    import torch

    print(f"device: {torch.cuda.get_device_name()}; GB = 1e9 bytes; ratio = torch time / triton time")
    print(f"{'dtype':>5} {'rows':>6} {'cols':>5} {'MB moved':>9} {'triton ms':>10} {'torch ms':>9} "
          f"{'triton GB/s':>12} {'torch GB/s':>11} {'ratio':>6} {'max err':>8}")
    for r in run(args.rows, args.cols, args.dtypes):
        print(f"{r['dtype']:>5} {r['rows']:>6} {r['cols']:>5} {r['bytes'] / 1e6:>9.1f} {r['triton_ms']:>10.4f} "
              f"{r['torch_ms']:>9.4f} {r['triton_GBps']:>12.0f} {r['torch_GBps']:>11.0f} {r['ratio']:>6.2f} "
              f"{r['max_scaled_err']:>8.1e}")
    print("max err: max |triton - torch| / max(1, |torch|) over the output")
    return 0


if __name__ == "__main__":
    sys.exit(main())
