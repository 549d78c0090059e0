"""Fuzz every option of every ``ringlab`` command with bad values: each must be a clear one-line error.

For each (command, option) the test feeds the option's fixed catalogue of bad values (the classes of
issue 18: decimal commas, wrong-case units, NaN and infinities, absurd exponents, out-of-range
numbers, empty and control-character text, unicode digits, very long strings, missing, foreign,
binary, latin-1 and contradictory files) and then hypothesis-drawn junk of the same kind, with the
rest of the command line valid, and requires the outcome ``clear`` of :func:`cli_harness.judge`:
exit status 1 or 2, one line on stderr naming the option, no traceback, within the time limit.
"""

from __future__ import annotations

import json
import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_harness import judge, record, run_cli
from ringlab.calc import parsing

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
NCCL_TABLE = FIXTURES / "nccl" / "a100_sxm4_8gpu_nccl_tests_2_19.txt"
LLAMA = FIXTURES / "hf_configs" / "llama-2-70b.json"
# Seconds per invocation: every bad value is refused long before this (RINGLAB_FUZZ_CALL_LIMIT overrides it).
CALL_LIMIT = float(os.environ.get("RINGLAB_FUZZ_CALL_LIMIT", "60"))

# --- catalogues of bad values, by kind of option ----------------------------------------------------------

NUMBER_JUNK = [
    ("empty", ""), ("blank", "  "), ("nan", "nan"), ("NaN", "NaN"), ("inf", "inf"), ("Infinity", "Infinity"),
    ("minus inf", "-inf"), ("huge exponent", "1e88888888"), ("overflowing", "1e500"),
    ("decimal comma", "2,5"), ("bad grouping", "1,00"), ("underscore pair", "1_0"), ("mixed grouping", "1,000_000"),
    ("hex", "0x10"), ("fullwidth digits", "\uff11\uff12"), ("arabic-indic digit", "\u0663"),
    ("two points", "1.2.3"), ("no digits", "e5"), ("point only", "."), ("fraction glyph", "\u00bd"),
    ("words", "abc"), ("long digits", "9" * 5000), ("NUL", "1\x00"), ("newline", "1\n2"), ("emoji", "\U0001f680"),
]
INT_BAD = NUMBER_JUNK + [("fraction", "2.5"), ("negative", "-1"), ("enormous", "1e30"), ("unit", "5 kg")]
POSINT_BAD = INT_BAD + [("zero", "0")]
SIZE_BAD = NUMBER_JUNK + [
    ("decimal comma size", "2,5GB"), ("lowercase mb", "16mb"), ("beyond an exabyte", "1e31"), ("negative", "-5"),
    ("zero", "0"), ("half byte", "0.5"), ("fractional bytes", "1.5e0B"), ("unknown unit", "5 parsecs"),
    ("doubled unit", "1GiBB"), ("lowercase gib", "1gib"), ("odd bits", "3b"),
]
COUNT_BAD = NUMBER_JUNK + [
    ("decimal comma count", "3,5B"), ("binary suffix", "7GiB"), ("milli", "7m"), ("zero", "0"), ("negative", "-7B"),
    ("fraction", "7.5"), ("beyond 1e18", "1e19"),
]
COUNT0_BAD = [v for v in COUNT_BAD if v[0] != "zero"]
INT0_BAD = INT_BAD
DURATION_BAD = NUMBER_JUNK + [
    ("zero", "0"), ("negative", "-1"), ("a thousand years", "1e11"), ("unknown unit", "5 parsecs"),
    ("capital S", "5S"), ("minutes typo", "5 mins"),
]
REAL_NONNEG_BAD = NUMBER_JUNK + [("negative", "-1"), ("tiny negative", "-1e-9"), ("unit", "5 us")]
REAL_POS_BAD = REAL_NONNEG_BAD + [("zero", "0")]
FRACTION_BAD = REAL_NONNEG_BAD + [("above one", "1.5"), ("percent", "90%")]
BANDWIDTH_BAD = NUMBER_JUNK + [
    ("zero", "0"), ("negative", "-1"), ("lowercase gb", "200gb"), ("beyond 1 PB/s", "1e16"), ("words", "fast"),
    ("per minute", "5GB/min"),
]
TEXT_BAD = [("empty", ""), ("blank", "   "), ("NUL", "a\x00b"), ("newline", "a\nb"), ("escape", "\x1b[31m"),
            ("surrogate", "\udcff"), ("very long", "x" * 5000)]
NAME_BAD = TEXT_BAD + [("unknown", "no-such-name"), ("near miss", "llama-２-7b"), ("long unknown", "q" * 300),
                       ("path-like", "../../etc/passwd")]
CHOICE_BAD = [("empty", ""), ("unknown", "bogus"), ("upper case", "ALL_REDUCE"), ("accented", "\u00e9"),
              ("NUL", "a\x00")]
WORLD_SIZES_BAD = [("empty", ""), ("ten billion", "1-9999999999"), ("reversed", "16-1"), ("zero", "0"),
                   ("letters", "a-b"), ("decimal", "2.5"), ("too many runs", "1-131072"), ("nan", "nan"),
                   ("negative", "-4"), ("fullwidth", "\uff14")]


def bad_files(root: Path, create: bool = False) -> list[tuple[str, str]]:
    """Paths to files no command can read: missing, a folder, empty, binary, latin-1, too long a name."""
    if create:
        root.mkdir(parents=True, exist_ok=True)
        (root / "empty.json").write_bytes(b"")
        (root / "binary.json").write_bytes(bytes(range(256)) * 40)
        (root / "latin1.json").write_bytes('{"model_type": "llama", "name": "caf\xe9"}'.encode("latin-1"))
        (root / "list.json").write_text("[1, 2, 3]")
    return [("missing", str(root / "no-such-file.json")), ("folder", str(root)), ("empty file", str(root / "empty.json")),
            ("binary file", str(root / "binary.json")), ("latin-1 file", str(root / "latin1.json")),
            ("JSON list", str(root / "list.json")), ("name over 255 bytes", str(root / ("n" * 300 + ".json")))]


def bad_configs(root: Path, create: bool = False) -> list[tuple[str, str]]:
    """HF config.json files with impossible fields (issue 18's examples), each a modified real config."""
    base = json.loads(LLAMA.read_text())
    cases = {
        "zero heads": {"num_attention_heads": 0}, "negative layers": {"num_hidden_layers": -2},
        "heads not dividing": {"num_key_value_heads": 7}, "string tie": {"tie_word_embeddings": "false"},
        "bool window": {"sliding_window": True}, "fractional window": {"sliding_window": 1.5},
        "negative kv_lora_rank": {"kv_lora_rank": -512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
                                  "qk_nope_head_dim": 128, "v_head_dim": 128, "model_type": "deepseek_v3"},
        "dense above layers": {"first_k_dense_replace": 500, "n_routed_experts": 8, "num_experts_per_tok": 2,
                               "moe_intermediate_size": 1024, "model_type": "deepseek_v3"},
        "string hidden": {"hidden_size": "8192"}, "NaN vocab": {"vocab_size": float("nan")},
    }
    out = []
    for label, change in cases.items():
        path = root / f"{label.replace(' ', '_')}.json"
        if create:
            root.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({**base, **change}))
        out.append((f"config {label}", str(path)))
    return out


def out_paths(root: Path) -> list[tuple[str, str]]:
    return [("missing folder", "/no/such/dir/out.csv"), ("a folder", str(root)), ("empty", ""),
            ("name over 255 bytes", str(root / ("n" * 300 + ".csv"))), ("NUL", str(root / "a\x00b.csv"))]


# --- junk drawn by hypothesis, never a valid value of its kind --------------------------------------------

_NOT_NUMBER_START = st.characters(blacklist_categories=("Cs",), blacklist_characters="0123456789+-. \t\n\r\x0b\x0c")
_JUNK_TAIL = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_UNITS = {"size": parsing.SIZE_UNITS, "count": parsing.COUNT_UNITS, "duration": parsing.DURATION_UNITS,
          "bandwidth": parsing.BANDWIDTH_UNITS}


def junk(kind: str):
    """A strategy of strings that are not a valid value of ``kind`` (a number grammar kind, or text)."""
    leading = st.builds(lambda c, t: c + t, _NOT_NUMBER_START, _JUNK_TAIL)
    if kind in ("name", "choice"):
        return st.builds(lambda t: "x-no-such-" + t, _JUNK_TAIL)
    if kind == "text":
        return st.sampled_from(["", " ", "\x00", "\n"]).flatmap(lambda c: st.builds(lambda t: t + c, _JUNK_TAIL))
    units = _UNITS.get(kind, {"": 1})
    unit = st.text(st.sampled_from(string.ascii_letters + "/%$#"), min_size=1, max_size=5).filter(
        lambda u: u not in units and not u.lower().startswith("e"))
    with_unit = st.builds(lambda n, u: f"{n}{u}", st.integers(1, 10**6), unit)
    return st.one_of(leading, with_unit)


# --- the commands and their options ----------------------------------------------------------------------

def cases(tmp: Path) -> list[tuple[str, list[str], str, list, str]]:
    """(id, argv before the option, option, bad values, junk kind) for every option of every command."""
    files, configs, outs = bad_files(tmp / "files"), bad_configs(tmp / "configs"), out_paths(tmp / "outs")
    gpumon_out = str(tmp / "gpumon.csv")
    model_bad = NAME_BAD + files + configs
    table = []

    def add(command: list[str], base: list[str], options: dict[str, tuple[list, str]]):
        for option, (values, kind) in options.items():
            drop = {"--size": "--numel", "--duration": "--count", "--model": "--params", "--params": "--model"}
            argv = list(base)
            if drop.get(option) in argv:  # mutually exclusive with the one being fuzzed
                i = argv.index(drop[option])
                del argv[i:i + 2]
            table.append((f"{' '.join(command)} {option}", command + argv, option, values, kind))

    add(["verify"], ["--input", "random", "--world-sizes", "2", "--numel", "8"], {
        "--world-sizes": (WORLD_SIZES_BAD, "text"), "--numel": (COUNT0_BAD, "count"), "--size": (SIZE_BAD, "size"),
        "--dtype": (NAME_BAD, "name"), "--op": (CHOICE_BAD, "choice"), "--input": (CHOICE_BAD, "choice"),
        "--collective": (CHOICE_BAD, "choice"), "--algorithm": (NAME_BAD, "name"), "--root": (INT0_BAD, "int"),
        "--seed": (INT0_BAD, "int")})
    add(["bench"], ["--world-size", "2", "--max-bytes", "64", "--iters", "1", "--warmup", "0", "--timeout", "60"], {
        "--world-size": (POSINT_BAD + [("beyond the machine", "4000")], "int"), "--min-bytes": (SIZE_BAD, "size"),
        "--max-bytes": (SIZE_BAD, "size"), "--iters": (POSINT_BAD, "int"), "--warmup": (INT0_BAD, "int"),
        "--timeout": (DURATION_BAD, "duration"), "--csv": (outs, "text"), "--collective": (CHOICE_BAD, "choice"),
        "--backend": (CHOICE_BAD, "choice"), "--dtype": (CHOICE_BAD, "choice")})
    add(["gpumon"], ["--out", gpumon_out, "--backend", "smi", "--count", "1", "--smi-timeout", "1"], {
        "--interval": (DURATION_BAD, "duration"),
        "--out": (outs + [("full device", "/dev/full"), ("endless device", "/dev/zero")], "text"), "--count": (POSINT_BAD, "int"),
        "--duration": (DURATION_BAD, "duration"), "--backend": (CHOICE_BAD, "choice"),
        "--smi-timeout": (DURATION_BAD, "duration"), "--nvml-timeout": (DURATION_BAD, "duration")})
    add(["check"], ["01a"], {"--file": (TEXT_BAD + files[:2] + files[-1:], "text"),
                              "--timeout": (DURATION_BAD, "duration")})
    table.append(("check EXERCISE", ["check"], "exercise", NAME_BAD, "name"))
    table.append(("practice CARD", ["practice", "--reveal"], "card", NAME_BAD, "name"))
    table.append(("topic TOPIC", ["topic"], "topic", NAME_BAD, "name"))
    add(["practice", "--session", "05"], [], {"--random": (POSINT_BAD, "int"), "--mock": (POSINT_BAD, "int"),
                                              "--seed": (INT0_BAD, "int"), "--budget": (DURATION_BAD, "duration")})
    add(["explain", str(NCCL_TABLE)], [], {
        "--nics": (POSINT_BAD, "int"), "--nic-gbps": (REAL_POS_BAD, "float"), "--plot": (outs, "text")})
    table.append(("explain FILE", ["explain"], "file", TEXT_BAD + files + [("dev zero", "/dev/zero")], "text"))
    add(["cost"], ["--world-size", "8", "--size", "1MiB"], {
        "--world-size": (POSINT_BAD, "int"), "--size": (SIZE_BAD, "size"), "--fabric": (NAME_BAD, "name"),
        "--alpha": ([v for v in DURATION_BAD if v[0] != "zero"], "duration"), "--bandwidth": (BANDWIDTH_BAD, "bandwidth"),
        "--gamma": (REAL_NONNEG_BAD, "float"), "--collective": (CHOICE_BAD, "choice")})
    add(["cost"], ["--topology", "dgx-h100", "--size", "1MiB"], {
        "--topology": (NAME_BAD, "name"), "--nodes": (POSINT_BAD, "int"), "--channels": (POSINT_BAD, "int"),
        "--algorithm": (NAME_BAD, "name"), "--protocol": (CHOICE_BAD, "choice")})
    add(["cost"], ["--topology", "custom", "--gpus-per-node", "8", "--gpu-gbs", "450", "--size", "1MiB"], {
        "--gpus-per-node": (POSINT_BAD, "int"), "--gpu-gbs": (REAL_POS_BAD, "float"), "--intra": (CHOICE_BAD, "choice"),
        "--nics": (INT0_BAD, "int"), "--nic-gbps": (REAL_NONNEG_BAD, "float")})
    add(["verify"], ["--topology", "dgx-h100", "--numel", "8"], {
        "--topology": (NAME_BAD, "name"), "--nodes": (WORLD_SIZES_BAD, "text")})
    add(["calc", "comm"], ["--strategy", "ddp", "--params", "7e9", "--topology", "dgx-h100", "--world-size", "8"], {
        "--topology": (NAME_BAD, "name"), "--nodes": (POSINT_BAD, "int")})
    add(["calc", "decode"], ["--model", "llama-2-7b", "--hardware", "h100-sxm", "--context", "4096", "--batch", "1",
                             "--topology", "dgx-h100"], {"--nodes": (POSINT_BAD, "int")})
    add(["calc", "kv"], ["--model", "llama-2-7b", "--tokens", "4096"], {
        "--model": (model_bad, "name"), "--tokens": (POSINT_BAD, "int"), "--batch": (POSINT_BAD, "int"),
        "--dtype": (NAME_BAD, "name"), "--tp": (POSINT_BAD, "int"), "--block-size": (POSINT_BAD, "int")})
    add(["calc", "comm"], ["--strategy", "ddp", "--params", "7e9", "--world-size", "8"], {
        "--strategy": (NAME_BAD, "name"), "--params": (COUNT_BAD, "count"), "--model": (model_bad, "name"),
        "--world-size": (POSINT_BAD, "int"), "--dtype": (NAME_BAD, "name"), "--gpus-per-node": (POSINT_BAD, "int"),
        "--grad-accum": (POSINT_BAD, "int"), "--bandwidth": (BANDWIDTH_BAD, "bandwidth"),
        "--alpha-us": (REAL_NONNEG_BAD, "float")})
    add(["calc", "roofline"], ["--flops", "512e9", "--bytes", "8e9", "--hardware", "a100-sxm-80gb"], {
        "--flops": (REAL_POS_BAD, "count"), "--bytes": (SIZE_BAD, "size"), "--hardware": (NAME_BAD, "name"),
        "--dtype": (NAME_BAD, "name")})
    add(["calc", "decode"], ["--model", "llama-2-7b", "--hardware", "a100-sxm-80gb", "--context", "4096",
                             "--batch", "1"], {
        "--model": (model_bad, "name"), "--hardware": (NAME_BAD, "name"), "--context": (POSINT_BAD, "int"),
        "--sla-ms": (REAL_POS_BAD, "duration"), "--batch": (POSINT_BAD, "int"), "--dtype": (NAME_BAD, "name"),
        "--kv-dtype": (NAME_BAD, "name"), "--tp": (POSINT_BAD, "int"), "--fabric": (NAME_BAD, "name"),
        "--memory-fraction": (FRACTION_BAD + [("zero", "0")], "float")})
    add(["calc", "bubble"], ["--stages", "4", "--microbatches", "8"], {
        "--stages": (POSINT_BAD, "int"), "--microbatches": (POSINT_BAD, "int"), "--schedule": (NAME_BAD, "name"),
        "--virtual-stages": (POSINT_BAD, "int"), "--t-f": (POSINT_BAD, "int"), "--t-b": (POSINT_BAD, "int"),
        "--t-w": (POSINT_BAD, "int")})
    add(["calc", "bubble", "--grid"], ["--stages", "4", "--microbatches", "8"], {
        "--t-f": ([("a grid of 1e9 slots", "1000000000")], "int"),
        "--microbatches": ([("a grid of 1e8 micro-batches", "100000000")], "int")})
    add(["serve-sim"], ["--seconds", "1", "--rate", "1"], {
        "--model": (model_bad, "name"), "--hardware": (CHOICE_BAD, "choice"), "--blocks": (POSINT_BAD, "int"),
        "--block-size": (POSINT_BAD, "int"), "--rate": (REAL_POS_BAD, "float"), "--seconds": (DURATION_BAD, "duration"),
        "--prompt-len": (POSINT_BAD, "int"), "--output-len": (POSINT_BAD, "int"),
        "--length-dist": (CHOICE_BAD, "choice"), "--shared-prefix": (INT0_BAD, "int"), "--n": (POSINT_BAD, "int"),
        "--max-num-batched-tokens": (POSINT_BAD, "int"), "--max-num-seqs": (POSINT_BAD, "int"),
        "--preemption": (CHOICE_BAD, "choice"), "--policy": (CHOICE_BAD, "choice"),
        "--watermark": (FRACTION_BAD, "float"), "--dtype": (NAME_BAD, "name"), "--seed": (INT0_BAD, "int")})
    shards_tiny = str(FIXTURES / "shards" / "tiny")
    add(["shards", "fetch", "http://127.0.0.1:9/model.safetensors.index.json"],
        ["--dest", str(tmp / "dl"), "--concurrency", "2", "--timeout", "5", "--retries", "0"], {
            "--concurrency": (POSINT_BAD + [("past 1,024", "1025")], "int"), "--timeout": (DURATION_BAD, "duration"),
            "--retries": (INT0_BAD, "int"), "--read-timeout": (DURATION_BAD, "duration")})
    table.append(("shards fetch INDEX_URL", ["shards", "fetch", "--dest", str(tmp / "dl"), "--concurrency", "2",
                                             "--timeout", "5"], "INDEX_URL",
                  TEXT_BAD + [("ftp", "ftp://x/i.json"), ("no host", "http:///i.json"), ("port", "http://x:99999/")],
                  "text"))
    add(["shards", "serve"], ["--dir", shards_tiny, "--duration", "0.05"], {
        "--dir": (TEXT_BAD + files, "text"), "--faults": (TEXT_BAD + [("unknown fault", "1=explode:1"),
                                                                      ("no such shard", "9=reset:0.5")], "text"),
        "--port": (INT0_BAD + [("past 65535", "65536")], "int"), "--seed": (INT0_BAD, "int"),
        "--duration": (DURATION_BAD, "duration"), "--records": (outs, "text")})
    add(["shards", "write"], ["--dir", str(tmp / "ckpt"), "--shards", "2", "--shard-size", "4KiB"], {
        "--shards": (POSINT_BAD, "int"), "--shard-size": (SIZE_BAD + [("not whole floats", "6")], "size"),
        "--seed": (INT0_BAD, "int")})
    return table


TMP = "@TMP@"  # stands for the session's folder of bad files in the table; replaced when a case runs
CASES = cases(Path(TMP))


@pytest.fixture(scope="session")
def fuzz_root(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("fuzz")
    bad_files(root / "files", create=True)
    bad_configs(root / "configs", create=True)
    (root / "outs").mkdir()
    return str(root)


def invoke(argv: list[str], option: str, value: str) -> list[str]:
    if option.startswith("-"):
        return argv + [f"{option}={value}"]  # "=" keeps values such as "-1" from reading as options
    return argv + ["--", value]  # a positional: "--" ends the options


def check_one(argv: list[str], option: str, label: str, value: str) -> str | None:
    """Run one bad value; return a description of what went wrong, or None when the error was clear."""
    outcome = run_cli(invoke(argv, option, value), timeout=CALL_LIMIT)
    names = [option] if option.startswith("-") else [option, "argument"]
    if "/" in value and Path(value).name:  # a file: naming it (and the field at fault) is naming the input
        names.append(Path(value).name[:40])
    verdict = next((v for v in (judge(outcome, n) for n in names) if v == "clear"), judge(outcome, option))
    record(label, verdict)
    if verdict == "clear":
        return None
    return f"{label} ({value[:60]!r}): {verdict}\n{outcome.describe()}"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_bad_value_is_a_clear_one_line_error(case, fuzz_root):
    _, argv, option, values, kind = case
    argv = [a.replace(TMP, fuzz_root) for a in argv]
    values = [(label, value.replace(TMP, fuzz_root)) for label, value in values]
    failures = [msg for label, value in values if (msg := check_one(argv, option, f"{kind}: {label}", value))]

    @settings(max_examples=6, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(junk(kind))
    def drawn(value):
        msg = check_one(argv, option, f"{kind}: drawn junk", value)
        if msg:
            failures.append(msg)

    drawn()
    assert not failures, "\n\n".join(failures[:5])


def test_unknown_commands_and_calculators_are_refused():
    for argv, option in ((["no-such-command"], "command"), ([""], "command"), (["calc", "nope"], "calculator"),
                         (["calc", ""], "calculator")):
        outcome = run_cli(argv)
        assert judge(outcome, option) == "clear", outcome.describe()
