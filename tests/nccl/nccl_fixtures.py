"""Paths and the manifest of the real NCCL fixtures, shared by the tests of ringlab.nccl."""

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())["fixtures"]


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()
