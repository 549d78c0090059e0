"""Production traces (issue 32): the bundled Azure and Mooncake excerpts load to the values their text holds, every
malformed row is refused with file, line and field, HashedPrompt's tokens and block keys match a brute-force
oracle, and ``serve-sim --trace`` replays each excerpt."""

from __future__ import annotations

import json
import math
import tomllib
from datetime import datetime
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.commands.serve_sim import build_parser, main
from ringlab.serving import HashedPrompt, Request, SchedulerConfig, TraceRequest, load_trace, simulate, trace_requests
from ringlab.serving.blocks import POLICIES, BlockManager, block_contents
from ringlab.serving.scheduler import Scheduler
from ringlab.serving.traces import (BUNDLED, DATA_DIR, MAX_LENGTH, MAX_TRACE_HASH_IDS, detect_format, iter_trace,
                                   trace_path)

ROOT = Path(__file__).resolve().parents[2]
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"


def _csv_rows(name):
    """The excerpt's rows as the test reads them: split on commas, no csv module."""
    lines = trace_path(name).read_text().splitlines()
    assert lines[0] == AZURE_HEADER
    return [line.split(",") for line in lines[1:]]


def _seconds(stamp: str) -> float:
    """Seconds of the day of 'YYYY-MM-DD HH:MM:SS.fffffff', all seven digits (the loader keeps six)."""
    hours, minutes, seconds = stamp.split(" ")[1].split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


# ---- the bundled excerpts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, rows, first, last", [
    ("azure-conv", 300, ("2023-11-16 18:15:46.6805900", 374, 44), ("2023-11-16 18:17:10.7096920", 212, 183)),
    ("azure-code", 300, ("2023-11-16 18:17:03.9799600", 4808, 10), ("2023-11-16 18:20:40.8181990", 176, 88)),
])
def test_azure_excerpts_load_to_the_rows_of_their_text(name, rows, first, last):
    records = load_trace(trace_path(name))
    text = _csv_rows(name)
    assert len(records) == len(text) == rows
    assert [text[0][0], int(text[0][1]), int(text[0][2])] == list(first)  # the rows SOURCES.md quotes
    assert [text[-1][0], int(text[-1][1]), int(text[-1][2])] == list(last)
    assert records[0] == TraceRequest(0.0, first[1], first[2], None)
    assert (records[-1].input_tokens, records[-1].output_tokens) == last[1:]
    assert records[-1].arrival_s == pytest.approx(_seconds(last[0]) - _seconds(first[0]), abs=1e-6)
    for record, row in zip(records, text):
        assert record.arrival_s == pytest.approx(_seconds(row[0]) - _seconds(first[0]), abs=1e-6)
        assert (record.input_tokens, record.output_tokens, record.hash_ids) == (int(row[1]), int(row[2]), None)


def test_azure_excerpt_figures_match_sources_md():
    conv, code = load_trace(trace_path("azure-conv")), load_trace(trace_path("azure-code"))
    assert sum(r.input_tokens for r in conv) == 270_000 and sum(r.output_tokens for r in conv) == 76_870
    assert sum(r.input_tokens for r in code) == 627_529 and sum(r.output_tokens for r in code) == 7_126
    assert conv[-1].arrival_s == pytest.approx(84.029102, abs=1e-6)  # 18:17:10.7096920 - 18:15:46.6805900


def test_mooncake_excerpt_loads_to_the_lines_of_its_text():
    path = trace_path("mooncake-conv")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    records = load_trace(path)
    assert len(records) == len(lines) == 300
    for record, line in zip(records, lines):
        assert record.arrival_s == line["timestamp"] / 1000
        assert (record.input_tokens, record.output_tokens) == (line["input_length"], line["output_length"])
        assert record.hash_ids == tuple(line["hash_ids"]) and len(record.hash_ids) == math.ceil(line["input_length"] / 512)
    assert records[0] == TraceRequest(0.0, 6758, 500, tuple(range(14)))  # {"timestamp": 0, "input_length": 6758, ...
    assert records[-1] == TraceRequest(102.0, 979, 140, (0, 7813))
    assert sum(r.input_tokens for r in records) == 4_269_971 and sum(r.output_tokens for r in records) == 113_079


def test_formats_are_told_from_the_first_line_or_given():
    assert [detect_format(trace_path(n)) for n in BUNDLED] == ["azure", "azure", "mooncake"]
    for name in BUNDLED:
        assert load_trace(trace_path(name), limit=5) == load_trace(trace_path(name), detect_format(trace_path(name)))[:5]
    with pytest.raises(ValueError, match=r"azure_conv_2023.csv:1: not a JSON object"):
        load_trace(trace_path("azure-conv"), "mooncake")
    with pytest.raises(ValueError, match="lacks column TIMESTAMP, ContextTokens, GeneratedTokens"):
        load_trace(trace_path("mooncake-conv"), "azure")


def test_limit_stops_reading_and_the_iterator_is_lazy(tmp_path):
    path = tmp_path / "t.jsonl"
    good = '{"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [3]}\n'
    path.write_text(good * 3 + "not json\n")
    assert len(load_trace(path, limit=3)) == 3  # the bad fourth line is never read
    rows = iter_trace(path)
    assert next(rows) == TraceRequest(0.0, 10, 1, (3,))
    with pytest.raises(ValueError, match=":4: not a JSON object"):
        list(rows)


# ---- malformed input ----------------------------------------------------------------------------------------

CSV_ROW = "2023-11-16 18:15:46.6805900,374,44"
MOON = '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}'


@pytest.mark.parametrize("suffix, text, where", [
    (".csv", "", "the file is empty"),
    (".csv", "\n\n", "the file is empty"),
    (".csv", AZURE_HEADER + "\n", "no requests"),
    (".csv", "TIMESTAMP,ContextTokens\n" + CSV_ROW + "\n", "1: the header lacks column GeneratedTokens"),
    (".csv", AZURE_HEADER + "\n" + CSV_ROW + "\n2023-11-16 18:15:47,5\n", "3: expected 3 fields"),
    (".csv", AZURE_HEADER + "\n2023-11-16 18:15:46,-5,44\n", "2: ContextTokens must be an integer >= 1, got -5"),
    (".csv", AZURE_HEADER + "\n2023-11-16 18:15:46,12.5,44\n", "2: ContextTokens must be an integer >= 1, got '12.5'"),
    (".csv", AZURE_HEADER + "\n2023-11-16 18:15:46,12,0\n", "2: GeneratedTokens must be an integer >= 1, got 0"),
    (".csv", AZURE_HEADER + "\n2023-11-16 18:15:46,12,x\n", "2: GeneratedTokens must be an integer >= 1, got 'x'"),
    (".csv", AZURE_HEADER + "\n2023-11-16 18:15:46,10000001,4\n", "2: ContextTokens 10,000,001 tokens is above 10,000,000"),
    (".csv", AZURE_HEADER + "\nyesterday,12,4\n", "2: TIMESTAMP 'yesterday' is not a date-time"),
    (".csv", AZURE_HEADER + "\n" + CSV_ROW + "\n2023-11-16 18:15:45.0,1,1\n", "3: TIMESTAMP goes back in time"),
    (".csv", AZURE_HEADER + "\n" + CSV_ROW + "\n2023-11-16 18:15:47+00:00,1,1\n", "3: TIMESTAMP '2023-11-16 18:15:47+00:00' and"),
    (".jsonl", "\n", "the file is empty"),
    (".jsonl", MOON + "\n{oops\n", "2: not a JSON object"),
    (".jsonl", "[1, 2]\n", "1: cannot tell the format"),
    (".jsonl", MOON + "\n[1, 2]\n", "2: expected a JSON object, got list"),
    (".jsonl", '{"timestamp": 0, "input_length": 6, "hash_ids": [0]}\n', "1: missing field output_length"),
    (".jsonl", MOON.replace('"input_length": 600', '"input_length": true'), "1: input_length must be an integer >= 1"),
    (".jsonl", MOON.replace('"input_length": 600', '"input_length": 600.5'), "1: input_length must be an integer >= 1"),
    (".jsonl", MOON.replace('"output_length": 3', '"output_length": -3'), "1: output_length must be an integer >= 1"),
    (".jsonl", MOON.replace("[0, 1]", "[0]"), "1: hash_ids has 1 ids; input_length 600 in blocks of 512 needs 2"),
    (".jsonl", MOON.replace("[0, 1]", "[0, -1]"), "1: hash_ids must be a list of integers >= 0"),
    (".jsonl", MOON.replace("[0, 1]", '"0 1"'), "1: hash_ids must be a list of integers >= 0"),
    (".jsonl", MOON.replace('"timestamp": 0', '"timestamp": "0"'), "1: timestamp must be a number of milliseconds"),
    (".jsonl", MOON.replace('"timestamp": 0', '"timestamp": 9') + "\n" + MOON, "2: timestamp goes back in time"),
    (".txt", "hello\n", "1: cannot tell the format"),
    (".txt", "\n\nhello\n", "3: cannot tell the format"),
])
def test_malformed_files_are_refused_naming_file_line_and_field(tmp_path, suffix, text, where):
    path = tmp_path / f"trace{suffix}"
    path.write_text(text)
    with pytest.raises(ValueError) as exc:
        load_trace(path)
    message = str(exc.value)
    assert message.startswith(str(path)) and where in message and "\n" not in message, message


def test_bad_arguments_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match="trace_format must be one of azure, mooncake"):
        load_trace(trace_path("azure-conv"), "csv")
    with pytest.raises(ValueError, match="limit"):
        load_trace(trace_path("azure-conv"), limit=0)
    with pytest.raises(FileNotFoundError):
        load_trace(tmp_path / "missing.csv")


# ---- HashedPrompt -------------------------------------------------------------------------------------------

def _oracle(length, ids, hash_block):
    return tuple(ids[i // hash_block] * hash_block + i % hash_block for i in range(length))


@st.composite
def prompts(draw):
    hash_block = draw(st.integers(1, 6))
    length = draw(st.integers(1, 30))
    ids = draw(st.lists(st.integers(0, 3), min_size=-(-length // hash_block), max_size=-(-length // hash_block)))
    tail = tuple(draw(st.lists(st.integers(0, 24), max_size=4)))  # small ids: a tail may continue a run
    if draw(st.booleans()):  # the same prompt built in two steps, as a decode instance's is
        return HashedPrompt(length, ids, hash_block).then(tail), _oracle(length, ids, hash_block) + tail
    return HashedPrompt(length, ids, hash_block, tail), _oracle(length, ids, hash_block) + tail


@settings(max_examples=150, deadline=None)
@given(prompts(), st.integers(-35, 35), st.integers(-35, 35), st.sampled_from([None, 1, 2, -1, 3]))
def test_hashed_prompt_is_the_sequence_of_its_formula(pair, start, stop, step):
    prompt, tokens = pair
    assert len(prompt) == len(tokens) and tuple(prompt) == tokens and list(prompt) == list(tokens)
    for block_size in range(1, 9):  # the allocator's contents, from hash ids where it can, as from the tokens
        assert block_contents(prompt, block_size) == block_contents(tokens, block_size)
    assert [prompt[i] for i in range(-len(tokens), len(tokens))] == [tokens[i] for i in range(-len(tokens), len(tokens))]
    assert prompt[start:stop:step] == tokens[start:stop:step]
    assert prompt[start:stop] == tokens[start:stop]
    for bad in (len(tokens), -len(tokens) - 1):
        with pytest.raises(IndexError):
            prompt[bad]


@settings(max_examples=120, deadline=None)
@given(prompts(), prompts(), st.integers(1, 8), st.sampled_from(POLICIES))
def test_a_hashed_prompt_shares_blocks_exactly_as_its_tokens_do(a, b, block_size, policy):
    # one keying scheme: a HashedPrompt is keyed from its tokens, so its blocks are found by the token list of
    # the same prompt (a recompute after preemption) and by another prompt exactly as far as the tokens agree
    (p, p_tokens), (q, q_tokens) = a, b
    assert (p == q) == (p_tokens == q_tokens)
    if p == q:
        assert hash(p) == hash(q)
    bm = BlockManager(64, block_size, policy=policy)
    bm.allocate("p", p)
    assert bm.cached_tokens(list(p_tokens)) == bm.cached_tokens(p)
    full = len(p_tokens) // block_size if policy == "uncached-first" else (len(p_tokens) - 1) // block_size
    assert bm.cached_tokens(list(p_tokens)) == full * block_size
    agree = next((i for i, (x, y) in enumerate(zip(p_tokens, q_tokens)) if x != y), min(len(p_tokens), len(q_tokens)))
    shared = min(agree // block_size, len(q_tokens) // block_size if policy == "uncached-first"
                 else (len(q_tokens) - 1) // block_size)
    assert bm.cached_tokens(q) == bm.cached_tokens(list(q_tokens)) == shared * block_size


def test_equal_hash_ids_give_equal_tokens_across_prompts():
    a, b = HashedPrompt(1200, [0, 5, 9]), HashedPrompt(1100, [0, 5, 4])
    assert a[:1024] == b[:1024] and a[1024] != b[1024]
    bm = BlockManager(200, 16)
    bm.allocate("a", a)
    assert bm.cached_tokens(b) == 1024  # the two shared hash blocks, 64 blocks of 16 tokens


@pytest.mark.parametrize("args, error, match", [
    ((0, [1]), ValueError, "length"),
    ((10, [1], 0), ValueError, "hash_block"),
    ((600, [1]), ValueError, "600 tokens in blocks of 512 has 2 blocks, so 2 hash ids, got 1"),
    ((10, [1, 2]), ValueError, "so 1 hash ids, got 2"),
    ((10, [-1]), ValueError, "integers >= 0"),
    ((10, [1.5]), TypeError, "hash_ids must be integers"),
    ((10, [True]), TypeError, "bool"),
    ((10.5, [1]), TypeError, "length"),
    ((10, [1], 512, [1.5]), TypeError, "tail must hold integer token ids"),
    ((10, [1], 512, [False]), TypeError, "tail .* bool"),
])
def test_hashed_prompt_refuses_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        HashedPrompt(*args)


def test_a_request_takes_a_hashed_prompt():
    prompt = HashedPrompt(1000, [3, 4])
    request = Request(0, 1.5, prompt, 7)
    assert request == Request(0, 1.5, HashedPrompt(1000, (3, 4)), 7) and hash(request) == hash(Request(0, 1.5, prompt, 7))
    assert len(request.prompt) == 1000 and request.prompt[512] == 4 * 512
    assert "HashedPrompt(length=1000, hash_ids=(3, 4), hash_block=512)" in repr(request)


# ---- records to requests ------------------------------------------------------------------------------------

def test_azure_requests_share_no_block():
    records = load_trace(trace_path("azure-code"))
    requests = trace_requests(records)
    assert [(r.request_id, r.arrival_s, len(r.prompt), r.max_new_tokens) for r in requests] == \
        [(i, rec.arrival_s, rec.input_tokens, rec.output_tokens) for i, rec in enumerate(records)]
    ids = [h for r in requests for h in r.prompt.hash_ids]
    assert len(ids) == len(set(ids)) == sum(math.ceil(rec.input_tokens / 512) for rec in records)


def test_mooncake_requests_share_the_blocks_their_ids_share():
    requests = trace_requests(load_trace(trace_path("mooncake-conv")))
    line_67, line_134 = requests[66].prompt, requests[133].prompt  # [0, 1541..1545] and [0, 1541..1544, 3753]
    assert line_67.hash_ids == (0, 1541, 1542, 1543, 1544, 1545) and line_134.hash_ids == (0, 1541, 1542, 1543, 1544, 3753)
    assert line_67[:5 * 512] == line_134[:5 * 512] and line_67[5 * 512] != line_134[5 * 512]
    bm = BlockManager(400, 16, policy="vllm-v1")
    bm.allocate(67, line_67)
    assert bm.cached_tokens(line_134) == 5 * 512


def test_waiting_requests_hold_their_prompt_not_a_token_list():
    # 40 prompts of 50k tokens arrive at once into a pool that serves one at a time: the 39 waiting keep their
    # HashedPrompt (a few ints), so memory follows the engine's batch, not the trace; the admitted one keeps it
    # too, with the tokens generated after it
    requests = [Request(i, 0.0, HashedPrompt(50_000, range(100 * i, 100 * i + 98), 512), 4) for i in range(40)]
    sched = Scheduler("llama-3.1-8b", "h100-sxm", 3_300, 16, SchedulerConfig(chunked_prefill=True, max_steps=3))
    trace = sched.run(requests)
    assert trace.truncated and len(sched.waiting) == 39 and len(sched.running) == 1
    assert all(g.tokens[0] is g.request.prompt for g in sched.waiting)
    running = sched.running[0]
    tokens = running.tokens[0]
    assert tokens.prompt is running.request.prompt and tokens.out == [] and len(tokens) == 50_000


def test_trace_requests_guards():
    with pytest.raises(ValueError, match="no requests"):
        trace_requests([])
    with pytest.raises(ValueError, match="record 1: hash_ids"):
        trace_requests([TraceRequest(0.0, 10, 1, (1,)), TraceRequest(1.0, 600, 1, (1,))])
    big = TraceRequest(0.0, MAX_LENGTH, 1, None)  # 19,532 blocks of 512 tokens each
    with pytest.raises(ValueError, match=f"{MAX_TRACE_HASH_IDS:,}: replay fewer"):
        trace_requests([big] * (MAX_TRACE_HASH_IDS // 19_532 + 1))
    assert len(trace_requests([big] * 3)) == 3  # 3 prompts of 10 M tokens: a few ints each, no token list
    mixed = trace_requests([TraceRequest(0.0, 600, 1, (0, 8)), TraceRequest(1.0, 10, 1, None)])
    assert mixed[1].prompt.hash_ids == (9,)  # fresh ids start above the trace's own


# ---- the command --------------------------------------------------------------------------------------------

def test_serve_sim_replays_the_mooncake_excerpt(capsys):
    assert main(["--trace", "mooncake-conv", "--trace-limit", "8", "--chunked-prefill", "--model", "llama-3.1-8b",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requests"] == data["finished"] == 8 and data["preemptions_recompute"] == 0
    # the first 8 lines share only hash id 0: 512 tokens, 32 blocks of 16, found by the 7 after the first
    assert data["prefix_cache_hit_blocks"] == 7 * 32


@pytest.mark.parametrize("name", ["azure-conv", "azure-code"])
def test_serve_sim_replays_the_azure_excerpts(name, capsys):
    assert main(["--trace", name, "--trace-limit", "20", "--chunked-prefill", "--blocks", "3000", "--model",
                 "llama-3.1-8b"]) == 0
    out = capsys.readouterr().out
    assert f"trace {name} (20 requests" in out and "20 requests: 20 finished" in out
    assert "prefix-cache hits 0 blocks" in out  # Azure prompts share nothing


@pytest.mark.parametrize("name", sorted(BUNDLED))
@pytest.mark.parametrize("model, context", [("llama-2-7b", 4_096), ("llama-3-8b", 8_192)])
def test_requests_longer_than_the_models_context_are_rejected(name, model, context, capsys):
    """Exactly the requests whose prompt + output exceed the model's max_position_embeddings (counted here from
    the records) are rejected, each named; --max-model-len moves the line."""
    records = load_trace(trace_path(name), limit=60)
    too_long = [i for i, r in enumerate(records) if r.input_tokens + r.output_tokens > context]
    assert main(["--trace", name, "--trace-limit", "60", "--chunked-prefill", "--model", model, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rejected"] == len(too_long) and data["finished"] == 60 - len(too_long)
    trace = simulate(trace_requests(records), model, "h100-sxm", 20_000,
                     config=SchedulerConfig(chunked_prefill=True))
    assert sorted(trace.rejected) == too_long
    assert all(f"exceed max_model_len, {model}'s max_position_embeddings={context:,}" in trace.rejected[i]
               for i in too_long)
    shorter = simulate(trace_requests(records), model, "h100-sxm", 20_000,
                       config=SchedulerConfig(chunked_prefill=True, max_model_len=2_000))
    assert sorted(shorter.rejected) == [i for i, r in enumerate(records) if r.input_tokens + r.output_tokens > 2_000]


def test_serve_sim_replays_a_file_by_path(tmp_path, capsys):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 100, "output_length": 4, "hash_ids": [0]}\n'
                    '{"timestamp": 500, "input_length": 100, "output_length": 4, "hash_ids": [0]}\n')
    assert main(["--trace", str(path), "--trace-format", "mooncake", "--blocks", "100", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["finished"] == 2 and data["prefix_cache_hit_blocks"] == 100 // 16


@pytest.mark.parametrize("argv, where", [
    (["--trace", "azure-conv", "--rate", "5"], "--rate (Poisson trace options) cannot be used"),
    (["--trace", "azure-conv", "--seconds", "9", "--seed", "1"], "--seconds, --seed (Poisson"),
    (["--trace-limit", "5"], "--trace-format and --trace-limit need --trace"),
    (["--trace-format", "azure"], "need --trace"),
    (["--trace", "azure-conv", "--trace-format", "mooncake"], "azure_conv_2023.csv:1: not a JSON object"),
    (["--trace", "no/such/file.csv"], "--trace no/such/file.csv: No such file or directory"),
    (["--trace", "azure-conv", "--trace-limit", "0"], "--trace-limit"),
    (["--trace", "azure-conv", "--trace-format", "csv"], "--trace-format"),
])
def test_serve_sim_trace_errors_exit_2_with_one_line(argv, where, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and where in err and err.count("\n") == 1, err


def test_help_lists_the_bundled_excerpts():
    (trace,) = [a for a in build_parser()._actions if "--trace" in a.option_strings]
    assert all(name in trace.help for name in BUNDLED) and "--rate" in trace.help


# ---- where the data came from -------------------------------------------------------------------------------

def test_sources_name_the_urls_and_licences_of_every_excerpt():
    text = (DATA_DIR / "SOURCES.md").read_text()
    for url in ("https://github.com/Azure/AzurePublicDataset", "https://github.com/kvcache-ai/Mooncake",
                "data/AzureLLMInferenceTrace_conv.csv", "data/AzureLLMInferenceTrace_code.csv",
                "FAST25-release/traces/conversation_trace.jsonl"):
        assert url in text
    assert "CC-BY-4.0" in text and "Apache License 2.0" in text
    assert "Apache License" in (DATA_DIR / "LICENSE-APACHE-2.0.txt").read_text()
    for file, _ in BUNDLED.values():
        assert f"`{file}`" in text and (DATA_DIR / file).stat().st_size < 100_000


def test_package_data_ships_every_trace_file():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["ringlab"]
    for path in DATA_DIR.iterdir():
        relative = PurePosixPath(path.relative_to(ROOT / "ringlab").as_posix())
        assert any(relative.match(p) for p in patterns), relative


def test_the_azure_timestamps_parse_as_the_dataset_notebook_reads_them():
    # the dataset's notebook shows 2023-11-16 18:15:46.680590 for the first row: seven digits cut to six
    assert datetime.fromisoformat(_csv_rows("azure-conv")[0][0]) == datetime(2023, 11, 16, 18, 15, 46, 680590)
