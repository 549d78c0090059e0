"""Machine variants that the committed notebook outputs must survive, as environment settings.

A notebook's text output has to be the same on every machine: x86 with AVX-512 or AVX2 or neither,
ARM, any thread count. One machine can imitate others by steering the libraries' kernel choice:

* ``dispatch``: torch's ATen kernels without SIMD (``ATEN_CPU_CAPABILITY=default``), and numpy
  without its AVX-512 code paths (``NPY_DISABLE_CPU_FEATURES`` naming each of numpy's dispatch
  targets that needs AVX-512 and that this CPU has; numpy refuses names outside that list, so the
  list is read from the running numpy, and is empty on CPUs without AVX-512);
* ``one_thread``: one thread for torch's intra-op pool and for BLAS (``OMP_NUM_THREADS``,
  ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``), so reductions split differently than on the
  machine that executed the notebooks.

``tests/test_notebooks_portable.py`` runs nbval once under both at once (``dispatch+one_thread``: a cell whose
output depends on either differs there), after checking that each took effect. To run any command under one
or both: ``.venv/bin/python tests/portability.py dispatch+one_thread -- .venv/bin/python -m pytest --nbval ...``.
"""

from __future__ import annotations

import os
import subprocess
import sys

VARIANTS = ("dispatch", "one_thread")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def avx512_dispatch_targets() -> list[str]:
    """numpy's dispatch targets that use AVX-512 and that this CPU supports (e.g. ``X86_V4``,
    ``AVX512_ICL``), in numpy's order: exactly the names ``NPY_DISABLE_CPU_FEATURES`` accepts here."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return [t for t in __cpu_dispatch__ if __cpu_features__.get(t) and ("512" in t or t == "X86_V4")]


def variant_env(variant: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: ``os.environ``) with the settings of ``variant``: one of :data:`VARIANTS`, or
    several joined by ``+`` (``dispatch+one_thread``: all of their settings).

    Raises ValueError for another name.
    """
    env = dict(os.environ if base is None else base)
    names = variant.split("+") if isinstance(variant, str) else [variant]
    if not all(name in VARIANTS for name in names):
        raise ValueError(f"variant={variant!r}; accepted: {', '.join(VARIANTS)}, or several joined by '+'")
    if "dispatch" in names:
        env["ATEN_CPU_CAPABILITY"] = "default"
        env.pop("NPY_DISABLE_CPU_FEATURES", None)
        targets = avx512_dispatch_targets()
        if targets:
            env["NPY_DISABLE_CPU_FEATURES"] = " ".join(targets)
    if "one_thread" in names:
        env.update(dict.fromkeys(THREAD_VARIABLES, "1"))
    return env


def main(argv: list[str]) -> int:
    usage = f"usage: python tests/portability.py {{{'|'.join(VARIANTS)}}}[+...] -- COMMAND [ARG ...]"
    if len(argv) < 3 or argv[1] != "--":
        print(usage, file=sys.stderr)
        return 2
    try:
        env = variant_env(argv[0])
    except ValueError as exc:
        print(f"{exc}\n{usage}", file=sys.stderr)
        return 2
    shown = {k: env[k] for k in ("ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES", *THREAD_VARIABLES) if k in env}
    print(f"portability variant {argv[0]}: {shown}", file=sys.stderr, flush=True)
    return subprocess.call(argv[2:], env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
