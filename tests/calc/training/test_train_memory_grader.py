"""Graders 17a/17b (memory per GPU, traffic per layer): the solution passes, the stubs are not attempted, each
classic mistake is caught and named, and the graders' expectations agree with ringlab's training calculators."""

import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOLUTION = ROOT / "solutions" / "17_train_memory_4d.py"


@pytest.fixture(scope="module")
def grader():
    return importlib.import_module("ringlab.check.graders.train_memory_4d")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"learner_{path.stem}_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _grade(grader, exercise_id, fn):
    (exercise,) = [e for e in grader.EXERCISES if e.id == exercise_id]
    return exercise.grader(fn)


FUNCTIONS = {"17a": "memory_per_gpu", "17b": "layer_traffic"}


@pytest.mark.parametrize("exercise_id", FUNCTIONS)
def test_the_worked_solution_passes(grader, exercise_id):
    result = _grade(grader, exercise_id, _load(SOLUTION, FUNCTIONS[exercise_id]))
    assert result.passed, str(result)
    assert result.cases > 60  # the hypothesis cases ran too


def test_the_generated_exercise_is_the_solution_with_stubs(grader):
    from ringlab.course.make_exercises import make_stub

    exercise = ROOT / "exercises" / "17_train_memory_4d.py"
    assert exercise.read_text() == make_stub(SOLUTION.read_text(), {v: k for k, v in FUNCTIONS.items()})
    for exercise_id, name in FUNCTIONS.items():
        result = _grade(grader, exercise_id, _load(exercise, name))
        assert result.status == "not attempted" and exercise_id in result.message


# name -> (exercise, [(text in the solution, replacement)], words the grader's message must contain)
MISTAKES = {
    "fp32_master_weights_ignored": ("17a", [("12 * n_params", "8 * n_params")], ["master", "12 B"]),
    "zero1_shards_gradients": ("17a", [("if zero_stage >= 2:\n        grads /= dp", "if zero_stage >= 1:\n        grads /= dp")],
                               ["ZeRO-1", "whole gradient"]),
    "sp_saving_forgotten": ("17a", [("per_layer = 34 * sbh / tp", "per_layer = sbh * (10 + 24 / tp)")],
                            ["sequence parallelism", "34 s b h / tp"]),
    "sp_counted_when_off": ("17a", [("per_layer = sbh * (10 + 24 / tp)", "per_layer = 34 * sbh / tp")],
                            ["replicated"]),
    "one_microbatch_in_flight": ("17a", [("in_flight, layers_here = pp, layers // pp", "in_flight, layers_here = 1, layers // pp")],
                                 ["in flight"]),
    "scores_kept": ("17a", [("per_layer * layers_here * in_flight}",
                             "(per_layer + 5 * heads * seq_len * seq_len * micro_batch / tp) * layers_here * in_flight}")],
                    ["scores"]),
    "zero3_params_whole": ("17a", [("if zero_stage >= 3:\n        weights /= dp", "if zero_stage >= 4:\n        weights /= dp")],
                           ["ZeRO-3"]),
    "tp_all_reduce_once_per_layer": ("17b", [("tp_bytes = 4 * all_reduce", "tp_bytes = all_reduce")],
                                     ["one all_reduce per layer", "4 per layer"]),
    "tp_forward_only": ("17b", [("tp_bytes = 4 * all_reduce", "tp_bytes = 2 * all_reduce")], ["forward pass only"]),
    "all_reduce_as_message": ("17b", [("all_reduce = 2 * (tp - 1) / tp * message", "all_reduce = message if tp > 1 else 0")],
                              ["2(N-1)/N"]),
    "ep_all_to_all_once_per_layer": ("17b", [("ep_bytes = 4 * all_to_all", "ep_bytes = all_to_all")],
                                     ["one all_to_all per MoE layer", "4 per layer"]),
    "ep_forward_only": ("17b", [("ep_bytes = 4 * all_to_all", "ep_bytes = 2 * all_to_all")], ["forward only"]),
    "ep_without_top_k": ("17b", [("routed = message * top_k", "routed = message")], ["top_k"]),
    "ep_keeps_nothing": ("17b", [("all_to_all = (ep - 1) / ep * routed", "all_to_all = routed if ep > 1 else 0")],
                         ["(ep-1)/ep"]),
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_each_classic_mistake_is_caught_and_named(grader, name, tmp_path):
    exercise_id, edits, words = MISTAKES[name]
    source = SOLUTION.read_text()
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    result = _grade(grader, exercise_id, _load(path, FUNCTIONS[exercise_id]))
    assert result.status == "wrong", str(result)
    for word in words:
        assert word in result.message, str(result)
    assert result.inputs


def test_wrong_shapes_are_explained(grader):
    assert "dict" in _grade(grader, "17a", lambda **kw: 3).message
    assert "'activations'" in _grade(grader, "17a", lambda **kw: {"params": 0, "grads": 0, "optimizer": 0}).message
    assert "number" in _grade(grader, "17b", lambda **kw: {"tp": "many", "ep": 0}).message


def test_traffic_expectation_is_what_stage_traffic_counts_per_layer(grader):
    """17b's expected bytes are one MoE layer's TP and EP items of ringlab's stage_traffic, per micro-batch."""
    from ringlab.calc import ModelConfig
    from ringlab.calc.training.layout import ParallelLayout, check_layout
    from ringlab.calc.training.traffic import stage_traffic

    m = ModelConfig.from_hf_config(dict(model_type="mixtral", hidden_size=512, intermediate_size=1024,
                                        num_attention_heads=8, num_key_value_heads=8, num_hidden_layers=1,
                                        vocab_size=1000, num_local_experts=8, num_experts_per_tok=2), name="one-moe")
    lay = ParallelLayout(dp=4, tp=2, ep=4)
    batch = check_layout(m, lay, 256, 1, 8)
    items = [i for i in stage_traffic(m, lay, batch, 0)
             if "embedding" not in i.what and "LM head" not in i.what and i.dim in ("tp", "ep")]
    per_mb = {d: sum(i.bytes_sent for i in items if i.dim == d) // batch.num_microbatches for d in ("tp", "ep")}
    want = grader.expected_traffic(hidden=512, seq_len=256, micro_batch=1, tp=2, ep=4, top_k=2, bytes_per_element=2)
    assert per_mb == want


def test_memory_expectation_matches_the_plan_for_gpt3(grader, gpt3):
    """17a's GPT-3 case against train_plan's first stage (its layers, without the embedding terms)."""
    from ringlab.calc.training.layout import ParallelLayout
    from ringlab.calc.training.plan import train_plan

    lay = ParallelLayout(dp=1, tp=8, pp=16, sequence_parallel=True)
    plan = train_plan(gpt3, lay, 2048, 1, 16, "ddp", "selective", dropout=True, flash_attention=False)
    want = grader.expected_memory(n_params=100, dp=1, zero_stage=0, hidden=12288, heads=96, layers=96, seq_len=2048,
                                  micro_batch=1, tp=8, pp=16, sequence_parallel=True)
    assert want["activations"] == plan.memory[0].activations.layers
