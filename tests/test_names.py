"""Builders say ``_schedule``, runners say ``run_``; the old names are the very same objects."""

import inspect

import pytest

import ringlab
import ringlab.collectives as collectives
import ringlab.dist as dist
from ringlab.collectives import ALGORITHMS, Schedule


@pytest.mark.parametrize("old", collectives.OLD_NAMES)
def test_old_builder_name_is_the_schedule_builder(old):
    new = getattr(collectives, f"{old}_schedule")
    assert getattr(collectives, old) is new
    assert isinstance(new(4), Schedule)


def test_every_registered_builder_follows_the_convention():
    for (collective, name), algo in ALGORITHMS.items():
        assert algo.build.__name__.endswith(f"{collective}_schedule"), (collective, name, algo.build.__name__)
        assert algo.build.__name__ in collectives.__all__
        assert algo.bytes_fn.__name__ == algo.build.__name__.removesuffix("_schedule") + "_bytes"
        assert algo.build.__name__.removesuffix("_schedule") in collectives.OLD_NAMES


@pytest.mark.parametrize("old", dist.OLD_NAMES)
def test_old_dist_name_is_the_runner(old):
    from ringlab.dist import executor as dist_executor

    new = getattr(dist, f"run_{old}")
    assert getattr(dist, old) is new is getattr(dist_executor, old)
    assert "tensor" in inspect.signature(new).parameters or "shard" in inspect.signature(new).parameters


def test_contract_name_stays():
    assert ringlab.ring_allreduce is ringlab.sim.api.ring_allreduce


@pytest.mark.parametrize("old", ["ring_channels", "hierarchical_all_reduce", "tree_chains_all_reduce", "nvls_all_reduce"])
def test_old_topology_builder_name_is_the_schedule_builder(old):
    from ringlab.topology import schedules

    assert getattr(schedules, old) is getattr(schedules, f"{old}_schedule")


def test_no_module_imports_another_modules_private_names():
    """A name that other modules need is public and documented; ``_name`` stays inside its module."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "ringlab"
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                local = node.level > 0 or (node.module or "").startswith("ringlab")
                found += [f"{path.relative_to(root)}: {a.name}" for a in node.names
                          if local and a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []
