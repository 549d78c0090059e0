"""The committed notebook outputs on other machines: nbval again under other kernels and thread counts.

``make test`` checks every notebook with nbval on this machine's own kernels. Here each variant of
``tests/portability.py`` (torch without SIMD and numpy without AVX-512; one thread) first proves that
it took effect, alone and combined, then nbval runs once more on all notebooks under both at once, so a
cell that prints kernel- or thread-dependent float noise fails here even on the machine that executed the
notebooks. The pass costs about four minutes of one core.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from portability import VARIANTS, avx512_dispatch_targets, variant_env

pytest.importorskip("nbval")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
BOTH = "+".join(VARIANTS)  # one nbval pass under every variant's settings at once
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "notebooks/sanitize.cfg"]
# What a child process sees: torch's SIMD level and thread count, and numpy's enabled features.
PROBE = """
import json, torch
try:
    from numpy._core._multiarray_umath import __cpu_features__
except ImportError:
    from numpy.core._multiarray_umath import __cpu_features__
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
                  "numpy_on": sorted(k for k, v in __cpu_features__.items() if v)}))
"""


def _probe(env):
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_dispatch_variant_switches_kernels_off():
    here, there = _probe(None), _probe(variant_env("dispatch"))
    assert there["capability"] == "DEFAULT"
    targets = avx512_dispatch_targets()  # empty on a CPU without AVX-512: then numpy runs as it is
    assert set(targets) <= set(here["numpy_on"]) and not set(targets) & set(there["numpy_on"])


def test_one_thread_variant_gives_torch_one_thread():
    assert _probe(variant_env("one_thread"))["threads"] == 1


def test_the_combined_variant_does_both():
    both = _probe(variant_env(BOTH))
    assert both["capability"] == "DEFAULT" and both["threads"] == 1
    assert variant_env(BOTH, {}) == {**variant_env("dispatch", {}), **variant_env("one_thread", {})}


@pytest.mark.parametrize("name", ["avx9000", "dispatch+avx9000", "", "+"])
def test_unknown_variant_is_refused(name):
    with pytest.raises(ValueError, match="dispatch, one_thread"):
        variant_env(name)


@pytest.mark.timeout(1200)
@pytest.mark.slow  # nbval over every notebook: about four minutes of one core
@pytest.mark.parametrize("variant", [BOTH])
def test_notebook_outputs_are_the_same_under(variant):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NBVAL, "notebooks"]
    done = subprocess.run(cmd, cwd=ROOT, env=variant_env(variant), capture_output=True, text=True, timeout=1150)
    # nbval prints each differing cell with a diff; the last lines name the failing cells
    assert done.returncode == 0, f"nbval under {variant} failed:\n{done.stdout[-12000:]}\n{done.stderr[-2000:]}"


# The seeded inputs of verify and the notebooks, hashed: they must be bit-identical under every variant.
SEEDED = """
import hashlib, json, numpy as np, torch
from ringlab.labs.grad_accum import make_batches, make_model
from ringlab.sim.gradients import _model

def digest(*arrays):
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()

rng = np.random.default_rng(0)
print(json.dumps({
    "verify model": digest(*(p.detach().numpy() for p in _model(torch, 0).parameters())),
    "grad_accum model": digest(*(p.detach().numpy() for p in make_model(3).parameters())),
    "grad_accum batches": digest(*(t.numpy() for t in make_batches(4, 2, 4))),
    "numpy generator": digest(rng.standard_normal(100_003), rng.standard_normal(4097, dtype=np.float32),
                              rng.random(1000), rng.integers(-9, 9, 1000)),
}))
"""


@pytest.mark.slow  # fresh interpreters under each variant
@pytest.mark.parametrize("variant", VARIANTS)
def test_seeded_data_is_bit_identical_under(variant):
    def run(env):
        done = subprocess.run([sys.executable, "-c", SEEDED], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert run(variant_env(variant)) == run(None)
