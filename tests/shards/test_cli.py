"""``ringlab shards``: the fetch contract held against a server these tests wrote (plain_server.py, raw sockets,
no ringlab code), the serve command as a real process, Ctrl-C, and bad input (one line, exit 2)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from plain_server import PlainServer
from ringlab.cli import main as cli_main
from ringlab.shards import INDEX_NAME
from shards_checks import assert_complete, assert_no_partial

RINGLAB = [sys.executable, "-m", "ringlab"]


def cli(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*RINGLAB, "shards", *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def fetch_cli(url, dest, *more, concurrency=2, timeout=30, process=False):
    """``ringlab shards fetch`` in this process (quick), or as its own process with ``process=True``."""
    argv = ["fetch", url, "--dest", dest, "--concurrency", concurrency, "--timeout", timeout, *more]
    if process:
        return cli(*argv)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["shards", *map(str, argv)])
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


def test_fetch_from_a_foreign_server_succeeds_with_only_the_checkpoint_left(checkpoint, tmp_path):
    with PlainServer(checkpoint.folder, {checkpoint.files[0]: "503once", checkpoint.files[1]: "norange"}) as server:
        done = fetch_cli(server.url(), tmp_path / "out", concurrency=2, process=True)
        assert done.returncode == 0, done.stderr
        assert server.peak <= 2
        deadline = time.monotonic() + 5
        while server.open and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.open == 0
    assert_complete(tmp_path / "out", checkpoint)
    assert sum(path.endswith(checkpoint.files[0]) for path, _ in server.requests) == 2


def test_a_server_that_ignores_range_still_gives_a_complete_file(checkpoint, tmp_path):
    """A body cut short leaves a .part; the retry's Range is ignored (200): the part starts over."""
    modes = {checkpoint.files[0]: "cutonce+norange"}
    with PlainServer(checkpoint.folder, modes) as server:
        done = fetch_cli(server.url(), tmp_path / "out", concurrency=3)
    assert done.returncode == 0, done.stderr
    assert_complete(tmp_path / "out", checkpoint)
    asked = [rng for path, rng in server.requests if path.endswith(checkpoint.files[0])]
    assert asked[0] is None and asked[1] == f"bytes={checkpoint.sizes[checkpoint.files[0]] // 2}-"


@pytest.mark.parametrize("mode, words", [("404", ["404"]), ("wrong", ["checksum mismatch"]),
                                         ("stall", ["deadline"])])
def test_fetch_failures_exit_1_naming_shard_and_reason(mode, words, checkpoint, tmp_path):
    bad = checkpoint.files[2]
    with PlainServer(checkpoint.folder, {bad: mode}) as server:
        done = fetch_cli(server.url(), tmp_path / "out", "--read-timeout", "60", concurrency=3, timeout=2)
        deadline = time.monotonic() + 5
        while server.open and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.open == 0, "connections left open after the failure"
        assert server.peak <= 3
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr  # one line: the shard and the reason
    line = done.stderr.splitlines()[0]
    if mode != "stall":  # a deadline names a shard it caught in flight: on a slow machine maybe another
        assert bad in line
    assert all(w in line for w in words), line
    assert_no_partial(tmp_path / "out", checkpoint)
    assert not os.path.exists(tmp_path / "out" / bad) and not os.path.exists(tmp_path / "out" / INDEX_NAME)
    if mode == "404":
        assert sum(path.endswith(bad) for path, _ in server.requests) == 1  # never retried


@pytest.mark.parametrize("mode, code", [("redirect", 0), ("redirect+wrong", 1)])
def test_a_hub_like_redirect_is_followed_and_its_etag_checked(mode, code, checkpoint, tmp_path):
    """Regression: the Hub answers each LFS file with a 302 to its CDN, X-Linked-Etag on the 302. The fetcher
    failed every shard with "http 302"; it must follow the redirect and verify against the 302's header."""
    with PlainServer(checkpoint.folder, {name: mode for name in checkpoint.files}) as server:
        done = fetch_cli(server.url(), tmp_path / "out", "--json", concurrency=2)
    assert done.returncode == code, done.stderr
    report = json.loads(done.stdout)
    if code == 0:
        assert_complete(tmp_path / "out", checkpoint)
        assert all(s["verified"] and s["expected"] == checkpoint.sha256[s["name"]] for s in report["shards"])
        assert {path for path, _ in server.requests} >= {f"/cdn/{name}" for name in checkpoint.files}
    else:
        assert done.stderr.splitlines() == [done.stderr.splitlines()[0]] and \
            done.stderr.splitlines()[0].endswith(": checksum mismatch")
        assert_no_partial(tmp_path / "out", checkpoint)


def test_an_index_naming_too_many_shards_is_refused_at_once(tmp_path):
    """Regression: an index of 20,000 names used to start a task per shard after ~0.5 ms of URL joining each,
    blocking the event loop 10 s past a 3 s deadline. More than MAX_SHARDS files is a bad index, said at once."""
    from ringlab.shards.checkpoint import MAX_SHARDS

    folder = tmp_path / "huge"
    folder.mkdir()
    names = {f"t{i}": f"f{i}.safetensors" for i in range(MAX_SHARDS + 1)}
    (folder / INDEX_NAME).write_text(json.dumps({"weight_map": names}))
    with PlainServer(str(folder)) as server:
        done = fetch_cli(server.url(), tmp_path / "out", concurrency=4, timeout=30)
        assert [path for path, _ in server.requests] == [f"/repo/{INDEX_NAME}"]  # not one shard asked for
    assert done.returncode == 1
    assert done.stderr.splitlines()[0].endswith(f"{INDEX_NAME}: bad index")
    assert f"at most {MAX_SHARDS:,}" in done.stdout  # the detail, on stdout
    assert os.listdir(tmp_path / "out") == []


def test_no_etag_means_complete_but_unverified(checkpoint, tmp_path):
    with PlainServer(checkpoint.folder, {name: "noetag" for name in checkpoint.files}) as server:
        done = fetch_cli(server.url(), tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and not any(s["verified"] for s in report["shards"])
    assert_complete(tmp_path / "out", checkpoint)


def test_json_report_has_the_event_log(checkpoint, tmp_path):
    with PlainServer(checkpoint.folder, {checkpoint.files[0]: "503once"}) as server:
        done = fetch_cli(server.url(), tmp_path / "out", "--json", concurrency=2)
    report = json.loads(done.stdout)
    assert report["ok"] and report["options"]["concurrency"] == 2
    attempts = report["attempts"]
    assert {a["slot"] for a in attempts} <= {0, 1}
    assert all(a["end"] >= a["start"] >= 0 for a in attempts)
    first = [a for a in attempts if a["shard"] == checkpoint.files[0]]
    assert [a["outcome"] for a in first] == ["retry", "ok"] and first[0]["status"] == 503


def _start_serve(checkpoint, tmp_path, *more):
    proc = subprocess.Popen([*RINGLAB, "shards", "serve", "--dir", checkpoint.folder, "--port", "0",
                             "--records", tmp_path / "records.json", *more],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/" + INDEX_NAME), proc.stderr.read()
    return proc, url


def test_serve_prints_the_url_serves_and_stops_on_ctrl_c(checkpoint, tmp_path):
    import urllib.request

    proc, url = _start_serve(checkpoint, tmp_path, "--faults", "2=status:404")
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert set(json.loads(resp.read())["weight_map"].values()) == set(checkpoint.files)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url.replace(INDEX_NAME, checkpoint.files[1]), timeout=10)
        assert err.value.code == 404
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    records = json.loads((tmp_path / "records.json").read_text())
    assert [r["status"] for r in records["requests"]] == [200, 404]


def test_ctrl_c_during_fetch_cleans_up(checkpoint, tmp_path):
    """SIGINT while shards stream slowly: exit 130, no partial file at a final path, no connection open."""
    proc, url = _start_serve(checkpoint, tmp_path, "--faults", "*=throttle:128KiB/s")
    try:
        fetcher = subprocess.Popen([*RINGLAB, "shards", "fetch", url, "--dest", tmp_path / "out", "--concurrency",
                                    "3", "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until bytes are landing in .part files
            if os.path.isdir(tmp_path / "out") and any(n.endswith(".part") and os.path.getsize(tmp_path / "out" / n)
                                                       for n in os.listdir(tmp_path / "out")):
                break
            time.sleep(0.05)
        fetcher.send_signal(signal.SIGINT)
        out, err = fetcher.communicate(timeout=60)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert fetcher.returncode == 130, err
    assert_no_partial(tmp_path / "out", checkpoint)
    records = json.loads((tmp_path / "records.json").read_text())
    assert records["peak_connections"] <= 3
    assert all(c["closed"] is not None and c["closed"] <= c["opened"] + 120 for c in records["connections"])


def test_write_makes_a_checkpoint(tmp_path):
    done = cli("write", "--dir", tmp_path / "ck", "--shards", "3", "--shard-size", "4KiB", "--seed", "5")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "ck" / INDEX_NAME)
    index = json.loads((tmp_path / "ck" / INDEX_NAME).read_text())
    assert index["metadata"]["total_size"] == 3 * 4096
    assert sorted(os.listdir(tmp_path / "ck")) == sorted([INDEX_NAME] + [f"model-0000{k}-of-00003.safetensors"
                                                                          for k in (1, 2, 3)])


@pytest.mark.parametrize("args, option", [
    (["fetch", "ftp://x/model.safetensors.index.json", "--dest", "@", "--concurrency", "2", "--timeout", "5"],
     "INDEX_URL"),
    (["fetch", "not a url", "--dest", "@", "--concurrency", "2", "--timeout", "5"], "INDEX_URL"),
    (["fetch", "http://127.0.0.1:9/i.json", "--dest", "@", "--concurrency", "0", "--timeout", "5"], "--concurrency"),
    (["fetch", "http://127.0.0.1:9/i.json", "--dest", "@", "--concurrency", "2.5", "--timeout", "5"],
     "--concurrency"),
    (["fetch", "http://127.0.0.1:9/i.json", "--dest", "@", "--concurrency", "2", "--timeout", "-1"], "--timeout"),
    (["fetch", "http://127.0.0.1:9/i.json", "--dest", "@", "--concurrency", "2", "--timeout", "nan"], "--timeout"),
    (["fetch", "http://127.0.0.1:9/i.json", "--dest", "@", "--concurrency", "2"], "--timeout"),
    (["fetch", "http://127.0.0.1:9/i.json", "--concurrency", "2", "--timeout", "5"], "--dest"),
    (["fetch", "http://127.0.0.1:9/i.json", "--dest", "@", "--concurrency", "2", "--timeout", "5", "--retries",
      "-1"], "--retries"),
    (["fetch", "http://127.0.0.1:99999/i.json", "--dest", "@", "--concurrency", "2", "--timeout", "5"], "INDEX_URL"),
    (["serve", "--dir", "@/none"], "--dir"),
    (["serve", "--dir", "CKPT", "--faults", "9=status:404"], "--faults"),
    (["serve", "--dir", "CKPT", "--faults", "1=explode:1"], "--faults"),
    (["serve", "--dir", "CKPT", "--faults", "1=reset:1.5"], "--faults"),
    (["serve", "--dir", "CKPT", "--port", "70000"], "--port"),
    (["write", "--dir", "@", "--shards", "0", "--shard-size", "1KiB"], "--shards"),
    (["write", "--dir", "@", "--shards", "2", "--shard-size", "1001"], "--shard-size"),
    (["nope"], "subcommand"),
])
def test_bad_input_is_one_line_and_exit_2(args, option, checkpoint, tmp_path, capsys):
    args = [a.replace("@", str(tmp_path / "x")).replace("CKPT", checkpoint.folder) for a in args]
    try:
        code = cli_main(["shards", *args])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert option in one_line(capsys.readouterr().err)
    assert not os.path.exists(tmp_path / "x")
