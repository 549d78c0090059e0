"""The import contract: ringlab's layers, and which imports may wait until a function runs.

Every ``import`` in ``ringlab/`` is read from the source (module level, inside functions and under
``TYPE_CHECKING`` alike), so the contract holds for a package the moment it is added. CONTRIBUTING.md
("Layers") explains the same table in prose; change both together.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ringlab"

# Bottom to top. A module may import its own component and any component of a lower layer; the components
# of one layer are independent of each other. The longest listed prefix names a module's component.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("ringlab.validation", "ringlab.optional", "ringlab.textfmt"),  # utilities of every layer: import nothing
    ("ringlab.collectives", "ringlab.course"),
    ("ringlab.topology",),
    ("ringlab.calc",),
    ("ringlab.calc.training", "ringlab.serving", "ringlab.nccl", "ringlab.shards"),
    ("ringlab.sim", "ringlab.plan"),
    ("ringlab.dist", "ringlab.cli_args"),
    ("ringlab.labs",),
    ("ringlab.check",),
    ("ringlab.practice",),
    ("ringlab.viz",),
    ("ringlab.commands",),
    ("ringlab",),  # the public face (ring_allreduce, verify, __version__): only the CLI imports it
    ("ringlab.cli",),
    ("ringlab.__main__",),
)
LAYER_OF = {component: i for i, layer in enumerate(LAYERS) for component in layer}

# Imports that may sit inside a function: optional dependencies (extras in pyproject.toml), which
# `import ringlab` must not pull in, and fcntl (POSIX only). Anything else is imported at module level.
OPTIONAL = {
    "torch": "extra torch", "triton": "extra triton", "matplotlib": "extra lab", "ipywidgets": "extra lab",
    "IPython": "extra lab (ipykernel)", "hypothesis": "extra lab (graders' property checks)",
    "pynvml": "extra gpu (nvidia-ml-py)", "safetensors": "extra shards", "httpx": "extra shards",
    "aiohttp": "optional client", "tqdm": "extra shards (progress bars)",
    "fcntl": "POSIX only (file locks; absent on Windows)",
}
# Modules whose imports wait on purpose, whatever they import.
LAZY_MODULES = {
    "ringlab.check.sandbox_child": "enters new user and mount namespaces first, which needs a process with one "
                                   "thread: it imports its machinery (and numpy's thread pools) afterwards",
}
# (importing package, imported module): check.registry imports every grader module while it builds EXERCISES, and
# check.loader and check.isolated import check.registry, so a grader imports those two when it runs.
LAZY_PAIRS = {
    ("ringlab.check.graders", "ringlab.check.loader"): "check.registry collects the graders at import",
    ("ringlab.check.graders", "ringlab.check.isolated"): "check.registry collects the graders at import",
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted (``from pkg import sub`` names ``pkg.sub`` when that is a module)
    line: int
    lazy: bool  # inside a function


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


@cache
def imports() -> tuple[Import, ...]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name, tree = module_name(path), ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found += _imports(tree, name, package, lazy=False)
    return tuple(dict.fromkeys(found))  # one record per (module, target, line)


def _imports(node, name: str, package: str, lazy: bool) -> list[Import]:
    out = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import):
            out += [Import(name, alias.name, child.lineno, lazy) for alias in child.names]
        elif isinstance(child, ast.ImportFrom):
            if child.level:
                base = package.split(".")[: len(package.split(".")) - child.level + 1]
                source = ".".join(base + ([child.module] if child.module else []))
            else:
                source = child.module
            for alias in child.names:
                sub = f"{source}.{alias.name}"
                out.append(Import(name, sub if source.startswith("ringlab") and _is_module(sub) else source,
                                  child.lineno, lazy))
        else:
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            out += _imports(child, name, package, inner)
    return out


def component(module: str) -> str | None:
    """The listed component a ringlab module belongs to (longest prefix), None outside ringlab."""
    if module != "ringlab" and not module.startswith("ringlab."):
        return None
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYER_OF and (n > 1 or len(parts) == 1):
            return ".".join(parts[:n])
    return "?"


def test_every_module_is_in_a_layer():
    unplaced = sorted({module_name(p) for p in PACKAGE.rglob("*.py") if component(module_name(p)) == "?"})
    assert not unplaced, (f"modules in no layer: {unplaced}; add their package to LAYERS in "
                          f"tests/test_import_contract.py and to CONTRIBUTING.md's layer table")


def test_imports_follow_the_layers():
    """Lower layers never import higher ones; components of one layer never import each other."""
    broken = []
    for imp in imports():
        a, b = component(imp.module), component(imp.target)
        if b is None or a == b or b == "?":
            continue
        if LAYER_OF[b] >= LAYER_OF[a]:
            rule = ("is in the same layer, and components of one layer are independent" if LAYER_OF[b] == LAYER_OF[a]
                    else f"is in layer {LAYER_OF[b]}, above {a}'s layer {LAYER_OF[a]}")
            broken.append(f"{imp.module} (line {imp.line}) imports {imp.target}: {b} {rule}")
    assert not broken, "import contract broken (tests/test_import_contract.py LAYERS):\n" + "\n".join(broken)


def _top_level(module: str) -> set[str]:
    return {i.target for i in imports() if i.module == module and not i.lazy}


@cache
def _pulls_optional(module: str) -> str | None:
    """The optional dependency that importing ``module`` loads at import time (through ringlab modules), if any."""
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for target in _top_level(current):
            if target.split(".")[0] in OPTIONAL:
                return target
            if target.startswith("ringlab"):
                todo += [target] + [".".join(target.split(".")[:n]) for n in range(2, target.count(".") + 1)]
    return None


def test_imports_inside_functions_are_optional_dependencies_only():
    """An import inside a function is an optional dependency, or a ringlab module that loads one."""
    stray = []
    for imp in imports():
        if not imp.lazy or imp.module in LAZY_MODULES or imp.target.split(".")[0] in OPTIONAL:
            continue
        if imp.target.startswith("ringlab") and _pulls_optional(imp.target):
            continue
        if any(imp.module.startswith(f"{package}.") and imp.target == target for package, target in LAZY_PAIRS):
            continue
        stray.append(f"{imp.module} (line {imp.line}) imports {imp.target} inside a function")
    assert not stray, ("move these imports to the top of their module (a lazy import is allowed for the optional "
                       f"dependencies {sorted(OPTIONAL)} only):\n" + "\n".join(stray))


def test_import_ringlab_stays_light(tmp_path):
    """The public face loads numpy and ml_dtypes, none of the optional dependencies."""
    import subprocess

    code = ("import sys, ringlab, ringlab.cli\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(OPTIONAL)!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("importer, target, ok", [
    ("ringlab.topology.cluster", "ringlab.collectives.cost", True),
    ("ringlab.collectives.cost", "ringlab.topology.cluster", False),
    ("ringlab.calc.comm", "ringlab.calc.training.step", False),
    ("ringlab.serving.blocks", "ringlab.nccl.facts", False),
    ("ringlab.viz.ring", "ringlab.check.cards", True),
    ("ringlab.sim.verify", "ringlab.viz.ring", False),
])
def test_contract_judges_known_pairs(importer, target, ok):
    """The rule itself: known allowed and forbidden pairs, independent of today's tree."""
    a, b = component(importer), component(target)
    assert (LAYER_OF[b] < LAYER_OF[a]) is ok
