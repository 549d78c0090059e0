"""The style rules of pyproject.toml ([tool.ruff]) hold on the whole tree: ``ruff check``, nothing fixed."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    pytest.importorskip("ruff", reason="ruff is a test dependency: pip install -e '.[test]'")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-fix", "--output-format", "concise", "."],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"ruff check (rules in pyproject.toml [tool.ruff]):\n{out.stdout}{out.stderr}"
