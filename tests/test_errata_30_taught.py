"""Issue 30, "What is taught": what notebooks 13, 16, 18 and cards 13, 18 state, checked against ringlab's own model.

1. No notebook, card, grader or explorer times a multi-node cluster on a flat link (one link per rank, the
   single-NIC picture): a static scan of notebook code cells, card modules, graders and the explorers (their
   calls and their defaults), and a trace of every alpha-beta time the cards, grader 18a and the explorers
   compute. More ranks than a link's domain are physical only on hosts with one GPU and one port each:
   ``single_gpu_hosts`` states that machine, and a notebook or card that uses it must say so in its text.
2. Notebook 13's DGX A100 follow-up agrees with the NIC count ringlab quotes from NVIDIA.
3. nccl-tests' ``count`` column is per rank for all_gather, reduce_scatter and alltoall (fixtures), and notebook 16
   says so, and says when times stopped being printed without decimals.
5. Card 13: all-to-all uses every NIC; its limit is the share of bytes that crosses nodes and the bisection.
"""

from __future__ import annotations

import ast
import inspect
import json
import operator
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from ringlab.collectives import cost as cost_module
from ringlab.collectives.cost import LINKS, get_link, single_gpu_hosts

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CARD_MODULES = sorted((ROOT / "ringlab" / "check" / "cards").glob("[0-9][0-9].py"))
GRADER_MODULES = sorted(p for p in (ROOT / "ringlab" / "check" / "graders").glob("*.py")
                        if p.name != "__init__.py")
VIZ_MODULES = sorted(p for p in (ROOT / "ringlab" / "viz").glob("*.py") if not p.name.startswith("_"))


# --------------------------------------------------------------------------- 1. no multi-node flat link

def domain_size(link_name: str) -> int:
    """The most GPUs one flat link preset can stand for: one NVLink domain (72 on NVLink 5's NVL72, 8 for NVLink
    4, PCIe and a node's NIC: past 8 GPUs the ranks span nodes, and a node has a NIC per GPU on its own rail)."""
    return 72 if link_name == "nvlink5" else 8


# Parameters that carry a collective's rank count, and the fabric parameters they go with (ringlab's call
# signatures: collective_time, ddp_step, fsdp_step, pipeline_step, TensorParallel, alpha_beta_time, ...).
WORLD_PARAMS = {"fabric": ("world_size", "group_size", "size"), "link": ("world_size", "group_size"),
                "dp_fabric": ("dp_size",)}


_INT_OPS = {ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub, ast.FloorDiv: operator.floordiv,
            ast.Pow: operator.pow}


def _literal_env(tree: ast.AST) -> dict[str, set]:
    """Every value each name is given anywhere in the source (flow-insensitive, so a name reused with a large
    value anywhere counts): literal assignments, tuple unpacking, loops over literal tuples, defaults, and
    ``LINKS["name"]`` lookups (kept as the preset's name)."""
    env: dict[str, set] = {}

    def values_of(node) -> set:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, str)) and not isinstance(node.value, bool):
            return {node.value}
        if isinstance(node, ast.Name):
            return set(env.get(node.id, ()))
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "LINKS":
            return {v for v in values_of(node.slice) if isinstance(v, str)}
        if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
            op = _INT_OPS[type(node.op)]
            ints = [(a, b) for a in values_of(node.left) for b in values_of(node.right)
                    if isinstance(a, int) and isinstance(b, int)]
            if isinstance(node.op, ast.Pow):
                ints = [(a, b) for a, b in ints if 0 <= b < 64]
            if isinstance(node.op, ast.FloorDiv):
                ints = [(a, b) for a, b in ints if b]
            return {op(a, b) for a, b in ints}
        return set()

    def bind(target, value_node) -> None:
        if isinstance(target, ast.Name):
            env.setdefault(target.id, set()).update(values_of(value_node))
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value_node, (ast.Tuple, ast.List)):
            for t, v in zip(target.elts, value_node.elts):
                bind(t, v)

    for _ in range(3):  # names defined from names: a few passes reach a fixed point in practice
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    bind(target, node.value)
            elif isinstance(node, ast.For) and isinstance(node.iter, (ast.Tuple, ast.List)):
                for item in node.iter.elts:
                    bind(node.target, item)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.args[len(node.args.args) - len(node.args.defaults):]
                for arg, default in zip(args, node.args.defaults):
                    env.setdefault(arg.arg, set()).update(values_of(default))
                for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults):
                    if default is not None:
                        env.setdefault(arg.arg, set()).update(values_of(default))
    env["__values_of__"] = values_of  # type: ignore[assignment]
    return env


def _imported_callables(tree: ast.AST) -> dict[str, object]:
    """Names bound by ``from ringlab... import name`` in the source, resolved to the objects."""
    import importlib

    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ringlab"):
            try:
                mod = importlib.import_module(node.module)
            except ImportError:
                continue
            for alias in node.names:
                obj = getattr(mod, alias.name, None)
                if callable(obj):
                    out[alias.asname or alias.name] = obj
    return out


def flat_link_calls(source: str) -> list[str]:
    """Calls in ``source`` (Python) to a ringlab function that pass a flat link preset (:data:`LINKS` name, or
    ``LINKS[name]``) as a fabric together with a rank count larger than that link's :func:`domain_size`.
    Returns one line per call found: ``"line N: call(...)"``."""
    tree = ast.parse(source)
    env = _literal_env(tree)
    values_of = env.pop("__values_of__")
    funcs = _imported_callables(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.func.id not in funcs:
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        try:
            bound = inspect.signature(funcs[node.func.id]).bind_partial(
                *node.args, **{k.arg: k.value for k in node.keywords})
        except (TypeError, ValueError):
            continue
        args = bound.arguments
        for fabric_param, world_params in WORLD_PARAMS.items():
            links = {v for v in values_of(args[fabric_param]) if v in LINKS} if fabric_param in args else set()
            worlds = {v for p in world_params if p in args for v in values_of(args[p]) if isinstance(v, int)}
            bad = [(link, n) for link in links for n in worlds if n > domain_size(link)]
            if bad:
                pairs = ", ".join(f"{n} ranks on {link}" for link, n in bad)
                found.append(f"line {node.lineno}: {ast.unparse(node)} ({pairs})")
    return found + flat_link_defaults(tree, values_of)


def flat_link_defaults(tree: ast.AST, values_of) -> list[str]:
    """Function definitions whose defaults pair a flat link preset with a rank count beyond its domain (an
    explorer that opens on such a case): ``"line N: def name(...) (...)"`` per definition."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        defaults = dict(zip([p.arg for p in a.args[len(a.args) - len(a.defaults):]], a.defaults))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        for fabric_param, world_params in WORLD_PARAMS.items():
            links = {v for v in values_of(defaults[fabric_param]) if v in LINKS} if fabric_param in defaults else set()
            worlds = {v for p in world_params if p in defaults for v in values_of(defaults[p]) if isinstance(v, int)}
            bad = [(link, n) for link in links for n in worlds if n > domain_size(link)]
            if bad:
                pairs = ", ".join(f"{n} ranks on {link}" for link, n in bad)
                found.append(f"line {node.lineno}: def {node.name}(...) defaults to {pairs}")
    return found


def notebook_code(path: Path) -> str:
    """A notebook's code cells as one Python source (IPython magics and shell lines dropped)."""
    cells = json.loads(path.read_text())["cells"]
    lines = [line for c in cells if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines()
             if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


# What notebook 18 (cell 13) and card 18 (its last follow-up, and its latency) did before issue 30: each must
# be caught, or the scan below proves nothing.
PRE_FIX_NOTEBOOK_18 = '''
from ringlab.calc.training.timeline import ddp_buckets, ddp_step, fsdp_step, model_layer_costs
costs = model_layer_costs("llama-3-8b", seq_len=4096, micro_batch=1, hardware="h100-sxm", efficiency=0.5)
for cap in (25, 1000, 1e6):
    t = ddp_step(costs, 64, "ib-ndr", bucket_cap_mb=cap)
t = fsdp_step(costs, 64, "ib-ndr")
'''
PRE_FIX_CARD_18 = '''
def values(k: int = 8) -> dict:
    from ringlab.calc.training.timeline import collective_time, ddp_step, model_layer_costs
    costs = model_layer_costs("llama-3-8b", seq_len=4096)
    n = 64  # data-parallel ranks of the large run: 8 DGX H100 nodes
    big = ddp_step(costs, n, "ib-ndr")
    return {"latency_ms": collective_time("all_reduce", 0, n, "ib-ndr") * 1e3}
'''


def test_the_scan_catches_notebook_and_card_18_as_they_were():
    assert len(flat_link_calls(PRE_FIX_NOTEBOOK_18)) == 2
    assert len(flat_link_calls(PRE_FIX_CARD_18)) == 2


@pytest.mark.parametrize("source, count", [
    ('from ringlab.collectives.cost import LINKS, alpha_beta_time\nib = LINKS["ib-xdr"]\n'
     'alpha_beta_time("all_reduce", "ring", 16, 2**20, ib)', 1),
    ('from ringlab.calc.training.timeline import pipeline_step\n'
     'pipeline_step(4, 8, dp_size=64, stage_grad_bytes=1, dp_fabric="ib-ndr")', 1),
    ('from ringlab.calc.training.timeline import TensorParallel\nTensorParallel(size=16, message_bytes=8, '
     'fabric="nvlink4")', 1),
    # within a domain, on a cluster, and a pipeline whose sends are pairs: nothing to report
    ('from ringlab.calc.training.timeline import ddp_step\nddp_step([], 8, "ib-ndr")', 0),
    ('from ringlab.calc.training.timeline import TensorParallel\nTensorParallel(size=64, message_bytes=8, '
     'fabric="nvlink5")', 0),
    ('from ringlab.calc.training.timeline import ddp_step\nfrom ringlab.topology import get_cluster\n'
     'ddp_step([], 64, get_cluster("dgx-h100", 8))', 0),
    ('from ringlab.calc.training.timeline import pipeline_step\n'
     'pipeline_step(64, 128, fabric="ib-ndr", dp_size=8, stage_grad_bytes=1, dp_fabric="ib-ndr")', 0),
])
def test_the_scan_pairs_rank_counts_with_their_fabric(source, count):
    assert len(flat_link_calls(source)) == count, flat_link_calls(source)


# What notebook 02, card 02, grader 18a and the collectives explorer did before issue 30.
PRE_FIX_SOURCES = {
    "notebook 02": ('''
from ringlab.collectives.cost import algorithm_table
from ringlab.viz.collectives import collectives_explorer, plot_collective_times
collectives_explorer(world_size=64, message_bytes=2**26, fabric="nvlink4")
plot_collective_times("all_reduce", "ib-ndr", 64)
for fabric, n in [("nvlink4", 8), ("ib-ndr", 16)]:
    algorithm_table("all_reduce", fabric, n)
''', 3),  # the explorer, the plot, and the loop's call (16 ranks on NVLink 4 as well as on NDR)
    "card 02": ('''
def values() -> dict:
    from ringlab.collectives.cost import LINKS, alpha_beta_time, crossover
    ib = LINKS["ib-ndr"]
    big_n = 64
    t = alpha_beta_time("all_reduce", "ring", big_n, 2**20, ib)
    return {"cross": crossover("all_reduce", ib, big_n)}
''', 2),
    "grader 18a": ('''
def _model_case():
    from ringlab.calc.training.timeline import collective_time
    return collective_time("all_reduce", 2**30, 64, "ib-ndr")
''', 1),
    "explorer defaults": ('''
def collectives_explorer(collective="all_reduce", world_size: int = 64, fabric: str = "nvlink4"):
    pass
def plot_collective_times(collective="all_reduce", fabric="ib-xdr", world_size=8):
    pass
''', 1),
}


@pytest.mark.parametrize("what", PRE_FIX_SOURCES)
def test_the_scan_catches_notebook_card_grader_and_explorer_02_18a_as_they_were(what):
    source, count = PRE_FIX_SOURCES[what]
    assert len(flat_link_calls(source)) == count, flat_link_calls(source)


def _label(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", NOTEBOOKS + CARD_MODULES + GRADER_MODULES + VIZ_MODULES, ids=_label)
def test_no_notebook_card_grader_or_explorer_times_a_multi_node_cluster_on_a_flat_link(path):
    source = notebook_code(path) if path.suffix == ".ipynb" else path.read_text()
    found = flat_link_calls(source)
    assert not found, f"{_label(path)} times ranks beyond one node on a flat link:\n" + "\n".join(found)


def single_gpu_host_calls(source: str) -> list[int]:
    """Lines of ``source`` that call :func:`single_gpu_hosts`: the framing a flat link beyond its domain needs."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
                  and isinstance(node.func, (ast.Name, ast.Attribute))
                  and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "single_gpu_hosts")


def test_single_gpu_hosts_states_the_machine_and_keeps_the_preset_numbers():
    doc = inspect.getdoc(single_gpu_hosts)
    assert "one GPU per host" in doc and "get_cluster" in doc and "dgx-h100" in doc
    for name in ("ib-ndr", "ib-xdr"):
        hosts = single_gpu_hosts(name)
        assert (hosts.alpha, hosts.bandwidth) == (LINKS[name].alpha, LINKS[name].bandwidth)
        assert hosts.name == f"{name}, one GPU per host" and hosts.name not in LINKS
        assert single_gpu_hosts(LINKS[name]) == hosts
    for inside in ("nvlink4", "nvlink5", "pcie5-x16", "ib-ndr, one GPU per host", 3):
        with pytest.raises(ValueError, match=r"^link must be one of the network presets ib-ndr, ib-xdr"):
            single_gpu_hosts(inside)


def _text(path: Path) -> str:
    return _markdown(path) if path.suffix == ".ipynb" else path.with_suffix(".md").read_text()


@pytest.mark.parametrize("path", NOTEBOOKS + CARD_MODULES, ids=_label)
def test_a_flat_link_beyond_its_domain_is_framed_as_single_gpu_hosts_in_the_text(path):
    source = notebook_code(path) if path.suffix == ".ipynb" else path.read_text()
    if not single_gpu_host_calls(source):
        return
    text = " ".join(_text(path).split())
    assert "one GPU per host" in text and "single_gpu_hosts" in text, (
        f"{_label(path)} times single-GPU hosts without saying so to the learner")


def test_notebook_and_card_02_time_dgx_nodes_on_the_cluster():
    """Both still teach the ring/tree crossover past one node, on the machine the flat model describes, and
    where they speak of DGX nodes the times come from the cluster."""
    nb = ROOT / "notebooks" / "02_collectives_and_costs.ipynb"
    card = ROOT / "ringlab" / "check" / "cards" / "02.py"
    for path in (nb, card):
        source = notebook_code(path) if path.suffix == ".ipynb" else path.read_text()
        assert single_gpu_host_calls(source), f"{_label(path)} no longer compares ring and tree past 8 ranks"
        assert 'get_cluster("dgx-h100"' in source, f"{_label(path)} speaks of DGX nodes without the cluster"


class FlatLinkTrace:
    """Records every ``alpha_beta_time`` that ringlab computes on a flat link preset for more ranks than the
    link's :func:`domain_size` (a Cluster's rings come as Links of their own, never a preset)."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[str, int, str]] = []
        original = cost_module.alpha_beta_time

        def traced(collective, algorithm, world_size, message_bytes, link, *args, **kwargs):
            resolved = get_link(link)
            if LINKS.get(resolved.name) == resolved and world_size > domain_size(resolved.name):
                self.calls.append((collective, int(world_size), resolved.name))
            return original(collective, algorithm, world_size, message_bytes, link, *args, **kwargs)

        for name, mod in list(sys.modules.items()):
            if name.startswith("ringlab") and getattr(mod, "alpha_beta_time", None) is original:
                monkeypatch.setattr(mod, "alpha_beta_time", traced)


def test_the_trace_catches_a_flat_link_at_64_ranks(monkeypatch):
    from ringlab.calc.training.timeline import LayerCost, ddp_step
    from ringlab.topology import get_cluster

    trace = FlatLinkTrace(monkeypatch)
    layers = [LayerCost("a", 1e-3, 2e-3, 2**20)]
    ddp_step(layers, 64, get_cluster("dgx-h100", 8))
    ddp_step(layers, 8, "ib-ndr")
    assert trace.calls == []
    ddp_step(layers, 64, "ib-ndr")
    assert trace.calls == [("all_reduce", 64, "ib-ndr")]


@pytest.mark.parametrize("card_id", ["02", "13", "18"])
def test_cards_02_13_and_18_time_multi_node_runs_on_the_cluster(monkeypatch, card_id):
    from ringlab.check.cards import draw_params, is_parametrised, load_card

    trace = FlatLinkTrace(monkeypatch)
    load_card(card_id)
    if is_parametrised(card_id):
        rng = np.random.default_rng(30)
        for _ in range(3):
            load_card(card_id, draw_params(card_id, rng))
    assert trace.calls == []


def test_the_timeline_explorer_times_every_choice_on_a_cluster(monkeypatch):
    pytest.importorskip("ipywidgets")
    pytest.importorskip("matplotlib")
    from ringlab.viz.timeline import timeline_explorer

    trace = FlatLinkTrace(monkeypatch)
    box = timeline_explorer("llama-3-8b", seq_len=1024)
    controls = {w.description: w for row in box.children[:2] for w in row.children}
    caption = box.children[-2]
    world, cluster, strategy = controls["world_size"], controls["cluster"], controls["strategy"]
    assert max(world.options) > 8  # the explorer does go past one node
    for preset in cluster.options:
        cluster.value = preset
        for n in world.options if preset == cluster.options[0] else (max(world.options[:-1]),):
            world.value = n
            for s in strategy.options:
                strategy.value = s
                assert preset in caption.value and "GB per rank" in caption.value
    assert trace.calls == []


def test_grader_18a_times_its_model_case_on_the_cluster(monkeypatch):
    from ringlab.calc.training.timeline import collective_time, ddp_buckets, model_layer_costs
    from ringlab.check.graders import overlap_timeline
    from ringlab.topology import get_cluster

    trace = FlatLinkTrace(monkeypatch)
    case = overlap_timeline.exposed_cases()[-1]
    assert trace.calls == []
    # the grader's own derivation, reproduced: 25 MiB buckets of Llama-3-8B on 8 DGX H100 nodes' rails
    layers = model_layer_costs("llama-3-8b", 4096, 1, "h100-sxm", 0.5)
    buckets = ddp_buckets(layers)
    cluster = get_cluster("dgx-h100", 8)
    want = [collective_time("all_reduce", sum(layers[i].grad_bytes for i in b), 64, cluster) for b in buckets]
    assert case["allreduce_s"] == want
    # 64 ranks on 8 nodes: 8 rails of 50 GB/s per node, 126 ring steps of the 5 us network latency
    nbytes = sum(layers[i].grad_bytes for i in buckets[-1])
    assert want[-1] == pytest.approx(2 * 63 / 64 * nbytes / 400e9 + 126 * 5e-6, rel=1e-9)


def test_the_collectives_explorer_opens_in_one_domain_and_frames_network_ranks(monkeypatch):
    pytest.importorskip("ipywidgets")
    pytest.importorskip("matplotlib")
    from ringlab.viz import collectives

    trace = FlatLinkTrace(monkeypatch)
    titles = []
    plot = collectives.plot_collective_times

    def recorded(*args, **kwargs):
        fig = plot(*args, **kwargs)
        titles.append(fig.axes[0].get_title())
        return fig

    monkeypatch.setattr(collectives, "plot_collective_times", recorded)
    box = collectives.collectives_explorer()
    n_slider, _, fabric_menu = box.children[:3]
    assert n_slider.value <= domain_size(fabric_menu.value)
    n_slider.value = 64
    for name in ("ib-ndr", "ib-xdr"):
        fabric_menu.value = name
        assert f"{name}, one GPU per host" in titles[-1]
    fabric_menu.value = "nvlink4"
    assert "hypothetical" in titles[-1]
    assert [c for c in trace.calls if not c[2].startswith("nvlink")] == []


def test_card_18_times_llama_3_8b_on_eight_dgx_nodes_as_derived_by_hand():
    from ringlab.check.cards import load_card

    text = load_card("18").text(reveal=True)
    # Llama-3-8B's gradients in bf16: 32 layers of 4096 x (2 x 4096 + 2 x 1024) + 3 x 4096 x 14336 + 2 x 4096
    # parameters, the untied embedding and LM head of 128,256 x 4096 each, and the final norm
    layer = (4096 * (2 * 4096 + 2 * 1024) + 3 * 4096 * 14336 + 2 * 4096) * 2
    embed = 128_256 * 4096 * 2
    grads = 32 * layer + 2 * embed + 4096 * 2

    def ring_ms(nbytes):  # 64 ranks on 8 nodes: the rails carry 8 x 50 GB/s per node, 126 steps of 5 us
        return (2 * 63 / 64 * nbytes / 400e9 + 126 * 5e-6) * 1e3

    assert f"{grads / 1e9:.1f} GB of bf16 gradients" in text
    assert f"the whole all-reduce takes {ring_ms(grads):.0f} ms" in text  # 80 ms, not 640 on one 50 GB/s link
    # exposed: layer 0's bucket and the embedding's, both complete when the backward ends, each in full
    assert f"{ring_ms(layer) + ring_ms(embed):.1f} ms are exposed: the last 2 buckets" in text
    assert "no bucketing hides it" not in text and "8 DGX H100 nodes" in text


# ------------------------------------------------------------------- 2. DGX A100's compute NICs

def _markdown(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_notebook_13_gives_the_dgx_a100_its_eight_compute_nics():
    from ringlab.topology.published import PUBLISHED

    text = _markdown(ROOT / "notebooks" / "13_nvlink_and_fabric.ipynb")
    said = re.findall(r"DGX A100(?:'s| with)?\s+(\d+)\s*[×x]\s*(\d+)\s*Gb/s", text)
    assert said, "notebook 13 no longer states the DGX A100's NICs"
    # NVIDIA's own figure, as ringlab quotes it (nccl#812, "DGX A100, 8x 200 Gb/s IB"), and the preset built on it
    run = next(r for r in PUBLISHED if "DGX A100" in r.what)
    quoted = run.cluster()
    assert {(int(n), int(g)) for n, g in said} == {(quoted.nics_per_node, int(quoted.nic_gbps))} == {(8, 200)}
    try:
        from ringlab.topology import get_cluster

        preset = get_cluster("dgx-a100")
    except ValueError:
        return  # the preset is optional here; the published run is the reference
    assert (preset.nics_per_node, preset.nic_gbps) == (quoted.nics_per_node, quoted.nic_gbps)


# ----------------------------------------------------------- 3. nccl-tests' count and time columns

FIXTURES = ROOT / "tests" / "fixtures" / "nccl"
# bytes per element of the types nccl-tests names (its src/common.cu type names)
ITEMSIZE = {"int8": 1, "uint8": 1, "char": 1, "half": 2, "bfloat16": 2, "int32": 4, "uint32": 4, "float": 4,
            "int": 4, "int64": 8, "uint64": 8, "double": 8}
PER_RANK = {"all_gather", "reduce_scatter", "all_to_all", "alltoall"}


def _fixture_runs():
    from ringlab.nccl import read_texts

    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text())["fixtures"]
    for entry in manifest:
        expect = entry.get("expect", {})
        if not expect.get("collective") or not expect.get("world_size"):
            continue
        text = (FIXTURES / entry["file"]).read_text()
        for run in read_texts([(entry["file"], text)]).runs:
            yield entry["file"], expect["collective"], expect["world_size"], run, text


def test_count_is_per_rank_for_gathered_and_scattered_collectives_in_every_fixture():
    """nccl-tests prints ``size`` = the whole buffer and ``count`` = the count passed to NCCL, each rank's share
    for all_gather, reduce_scatter and alltoall (src/all_gather.cu: ``paramcount = count / nranks``)."""
    per_rank = whole = 0
    for name, collective, world, run, _ in _fixture_runs():
        for row in run.rows:
            if row.size == 0 or row.count == 0:  # count 0: not printed (rccl-tests' JSON lines carry none)
                continue
            item = ITEMSIZE[row.dtype]
            if collective in PER_RANK:
                assert row.count == row.size // (world * item) and row.size % (world * item) == 0, (name, row.size)
                per_rank += 1
            else:
                assert row.count * item == row.size, (name, row.size)
                whole += 1
    assert per_rank >= 20 and whole >= 100  # the all_gather fixture (16 ranks) and the all_reduce ones


def test_notebook_16_says_count_is_per_rank_for_those_collectives():
    text = _markdown(ROOT / "notebooks" / "16_reading_nccl.ipynb")
    row = next(line for line in text.splitlines() if line.startswith("| `count`"))
    for name in ("all_gather", "reduce_scatter", "alltoall"):
        assert name in row, f"the count row does not name {name}"
    assert "per rank" in row and "count × n × itemsize" in row


def _time_token(line: str, size: int) -> str:
    """The out-of-place time as printed: the first token after the row's root (or redop) column."""
    tokens = line.split()
    i = tokens.index(str(size))
    rest = tokens[i + 2:]  # count, then type, redop, root
    j = next(k for k, t in enumerate(rest) if re.fullmatch(r"-?\d+", t) and k >= 2)
    return rest[j + 1]


def _version(text: str) -> tuple[int, ...] | None:
    m = re.search(r"nccl-tests(?: version |-)(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in m.groups()) if m else None


def printed_decimals(version: tuple[int, ...], time_us: float) -> int | None:
    """Decimals nccl-tests prints a time with (None: exponent notation). Through 2.17.2, src/common.cu:
    ``%7.0f`` from 10,000 us, ``%7.1f`` from 100 us, else ``%7.2f``. From 2.17.3, src/util.cu getFloatStr(t, 7):
    as many decimals (2, 1, 0) as fit in 7 characters, then ``%7.1e``."""
    if version <= (2, 17, 2):
        return 0 if time_us >= 1e4 else 1 if time_us >= 100 else 2
    digits = len(str(int(time_us)))
    return 2 if digits < 5 else 1 if digits < 6 else 0 if digits < 8 else None


def test_fixture_times_follow_the_format_of_their_nccl_tests_version():
    checked = set()
    for name, _, _, run, text in _fixture_runs():
        version = _version(text)
        if version is None:
            continue
        for row in run.rows:
            token = _time_token(row.line.text, row.size)
            decimals = len(token.split(".")[1]) if "." in token else 0
            assert decimals == printed_decimals(version, float(token)), (name, version, token)
            checked.add(version)
    assert {(2, 17, 1), (2, 17, 8), (2, 18, 2), (2, 19, 4)} <= checked  # both formats, each side of 2.17.3


def test_notebook_16_dates_the_time_format():
    text = _markdown(ROOT / "notebooks" / "16_reading_nccl.ipynb")
    row = next(line for line in text.splitlines() if line.startswith("| `time`"))
    assert "2.17.2" in row and "2.17.3" in row and "e+" in row


# ------------------------------------------------------------------------- 5. card 13's all-to-all

def test_card_13_all_to_all_uses_every_nic_and_is_bound_by_its_cross_node_share():
    from ringlab.check.cards import load_card

    card = load_card("13")
    text = card.text(reveal=True)
    assert "cannot be\n  spread over rails" not in text and "cannot be spread over rails" not in text
    assert "does use every NIC" in text and "bisection" in text
    # 1 GiB all-to-all, 16 GPUs on 2 DGX H100 nodes: each rank sends 15/16 GiB, 8/16 GiB of it to the other
    # node through its own 50 GB/s NIC (15 steps of 5 us); in one node 7/8 GiB over NVLink 4 (7 steps of 2 us)
    two = 2**30 * 8 / 16 / 50e9 + 15 * 5e-6
    one = 2**30 * 7 / 8 / 450e9 + 7 * 2e-6
    assert card.values["a2a_two_ms"] == pytest.approx(two * 1e3, rel=1e-9)
    assert card.values["a2a_one_ms"] == pytest.approx(one * 1e3, rel=1e-9)
    assert f"{two * 1e3:.1f} ms, against {one * 1e3:.1f} ms for\n  8 GPUs in one node" in text
    assert f"{2**30 * 15 / 16 / 1e9:.2f} GB each rank sends" in text
