"""Issue 31's class "silently ignored options": an option the command accepts and then does nothing with.

For every option of every command (found by walking the parsers, cli_harness.command_parsers, so a new
option is tried by construction) and every representative command line of that command
(cli_harness.REPRESENTATIVE), the command runs once as it is and once per other valid value of the
option, until one of them has an effect. The values come from the option itself:

* a flag: present against absent;
* choices: the other choices;
* a number (a cli_args number type): its current value against values near it and a few plain ones,
  kept only when the option's own type function accepts them;
* an output file (output_file, figure_file): absent (or another name) against a file in the test's folder;
* a name (text without choices): the names the command itself lists when given an unknown one, the lists
  in the option's help, an empty file, then (as guesses) the other words of the message and the help.

An option in a mutually exclusive group with one on the command line replaces it, and its own values are
compared with each other. Positional arguments (an exercise, a card, a file) are not options: not walked.

What a run shows is compared: the exit status, stdout (as parsed JSON where the parser has ``--json``),
stderr, and every file written in the test's folder. Lines that differ between two runs of the same
command line (timestamps, timings) are compared with their digits masked. A command whose run starts
processes (LAUNCHERS) records the arguments it hands to its runner instead of running it. Where the
--json document is the same, the text output is compared as well (counted in the summary: a JSON
document that leaves out what the option changes).

Each (command, option, base) must end as one of

``changed``        some value changed what the run shows;
``refused``        some value was refused with exit status 2 and one line naming the option (a refusal that
                   repeats the value is a rejected value, not a refused combination, and does not count);
``with partner``   no change alone, but a change once the options the help names (``--x``, or a choice of
                   another option such as ``broadcast``) are added to both runs;
``allowed``        listed in ALLOWED with its reason (printed in the summary);

and never ``ignored``. The counts are printed at the end of the run (conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter

import pytest

from cli_harness import (NUMBER_TYPES, REPRESENTATIVE, STATS, command_parsers, exclusive_partners, names_option,
                         run_cli, without)

PARSERS = command_parsers()
CALL_LIMIT = 60.0  # seconds per call: generous for a busy machine; every representative run takes well under 2 s
# Commands whose run starts processes: (module, runner function). The fuzz records the arguments the command
# hands to the runner (its observable effect) instead of starting the processes (bench: about 15 s a run).
LAUNCHERS = {("bench",): ("ringlab.commands.bench", "run_bench")}
# (command, option): why the option may change nothing on every representative command line. Keep it short.
ALLOWED: dict[tuple[tuple[str, ...], str], str] = {
    (("shards", "serve"), "--port"): "the port shows only in the URL printed, and --port 0 picks a new one each run, "
                                     "so the fuzz masks that line as noise (tests/shards/test_cli.py reads the URL)",
}
VERDICTS = ("changed", "refused", "with partner", "allowed", "ignored")
COUNTS: Counter = STATS.setdefault("ignored_options", Counter())  # printed by conftest.py
STATS.update(ignored_options_allowed=ALLOWED, ignored_options_verdicts=VERDICTS)

BOGUS = "zz-no-such-value"
# 90: a compute capability (--compcap takes 60 to 120)
PLAIN_NUMBERS = ["2", "4", "1", "8", "16", "3", "0.5", "1000", "4096", "1048576", "1e9", "0.001", "90"]
PLAIN_TEXT = ["2", "1-2", "1,2", "4", "1", "1:1"]  # for text types of their own (world-size lists, a P:D split)
MAX_TRIES = 12  # values tried per option and base before the partners named in its help


def _options():
    out = []
    for path, parser in sorted(PARSERS.items()):
        for action in parser._actions:
            if action.option_strings:
                out.append((path, action.option_strings[-1]))
    return out


CASES = _options()


def _action(parser, option):
    return next(a for a in parser._actions if option in a.option_strings)


def _type_name(action) -> str:
    return getattr(action.type, "__name__", "") if action.type is not None else ""


def _takes_value(action) -> bool:
    return action.nargs != 0


def _current(argv: list[str], action) -> str | None:
    """The value ``argv`` gives ``action`` (the text after the option, "" for a flag), or None when absent."""
    for i, word in enumerate(argv):
        if word in action.option_strings:
            return "" if not _takes_value(action) else argv[i + 1]
        head, _, value = word.partition("=")
        if head in action.option_strings and "=" in word:
            return value
    return None


def _accepts(action, text: str):
    try:
        return action.type(text) if action.type is not None else text
    except Exception:  # noqa: BLE001 - argparse's contract: any error means the type refuses the text
        return None


def _number_candidates(action, current: str | None) -> list[str]:
    """Values near the current one (or the default), then plain numbers, that the option's type accepts and that
    differ from the current value."""
    start = current if current is not None else (None if action.default is None else str(action.default))
    now = _accepts(action, start) if start is not None else None
    near = []
    if now is not None:
        x = float(now)
        near = [x * 2, x / 2, x + 1, x * 10, x - 1]
    texts = [repr(int(v)) if float(v).is_integer() and abs(v) < 1e18 else repr(float(v)) for v in near]
    out = []
    # durations smallest first: a time limit shows when it cuts a run short, and a long one keeps the run waiting
    plain = sorted(PLAIN_NUMBERS, key=float) if _type_name(action) == "duration" else PLAIN_NUMBERS
    for text in texts + plain:
        value = _accepts(action, text)
        if value is None or (now is not None and float(value) == float(now)) or text in out:
            continue
        out.append(text)
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9][A-Za-z0-9_.+/-]*[A-Za-z0-9]|[A-Za-z0-9]", text or "")


def _echoes(message: str, value: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", message) is not None


class Trial:
    """One (command, base) with a scratch folder wiped before every run; runs are cached by argv."""

    def __init__(self, path, parser, tmp, monkeypatch):
        self.path, self.parser, self.tmp = path, parser, tmp
        self.work = tmp / "w"
        self.empty_file = tmp / "inputs" / "empty.txt"  # outside the folder wiped before each run
        self.empty_file.parent.mkdir(parents=True, exist_ok=True)
        self.empty_file.write_text("")
        self.monkeypatch = monkeypatch
        self.cache: dict[tuple, tuple] = {}
        self.noisy: set[str] = set()
        self.calls: list[str] = []
        if path in LAUNCHERS:
            module_name, function = LAUNCHERS[path]
            import importlib

            module = importlib.import_module(module_name)

            def record(*args, **kwargs):
                self.calls.append(f"{function}{args!r}{sorted(kwargs.items())!r}")
                return [], []

            monkeypatch.setattr(module, function, record)

    def fill(self, argv):
        return [a.replace("@TMP@", str(self.work)) for a in argv]

    def run(self, argv: list[str], fresh: bool = False):
        """(exit status, lines shown, first stderr line) of ``ringlab PATH argv``."""
        key = tuple(argv)
        if key in self.cache and not fresh:
            return self.cache[key]
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.monkeypatch.setenv("XDG_STATE_HOME", str(self.work / "state"))
        self.calls.clear()
        outcome = run_cli([*self.path, *argv], timeout=CALL_LIMIT)
        COUNTS["calls"] += 1
        assert not outcome.hung and outcome.error is None and "Traceback" not in outcome.err, \
            f"{' '.join(self.path)} {' '.join(argv)}: {outcome.describe()}"
        try:
            shown = json.dumps(json.loads(outcome.out), sort_keys=True, indent=1).splitlines()
        except ValueError:
            shown = outcome.out.splitlines()
        lines = [f"out: {x}" for x in shown] + [f"err: {x}" for x in outcome.err.splitlines()]
        lines += [f"call: {c}" for c in self.calls]
        for root, _, names in os.walk(self.work):
            for name in sorted(names):
                full = os.path.join(root, name)
                rel = os.path.relpath(full, self.work)
                with open(full, "rb") as f:
                    lines += [f"file {rel}: {x}" for x in f.read().decode("utf-8", "replace").splitlines()]
                lines.append(f"file {rel} written")
        err = [x for x in outcome.err.splitlines() if x.strip()]
        result = (outcome.code, tuple(lines), err[0] if len(err) == 1 else None)
        self.cache[key] = result
        return result

    def baseline(self, argv):
        """Run ``argv`` twice: lines that differ between the runs are noise (compared with digits masked)."""
        first = self.run(argv)
        second = self.run(argv, fresh=True)
        self.noisy |= {_mask(x) for x in set(first[1]) ^ set(second[1])}
        return first

    def shown(self, result):
        return result[0], tuple(_mask(x) if _mask(x) in self.noisy else x for x in result[1])


def _mask(line: str) -> str:
    return re.sub(r"\d+", "#", line)


def _listed(text: str) -> list[str]:
    """The items of the comma-separated lists in ``text`` ("presets: a, b, c" -> a, b, c)."""
    pieces = (text or "").split(", ")
    out = []
    for i, piece in enumerate(pieces):
        words = _words(piece)
        if words and i + 1 < len(pieces):
            out.append(words[-1])
        if words and i > 0:
            out.append(words[0])
    return list(dict.fromkeys(out))


def _candidates(trial: Trial, action, base: list[str], current: str | None) -> list[tuple[list[str], bool]]:
    """(command line, trusted) pairs giving ``action`` another value than ``base`` does, most promising first.
    Trusted values are valid by construction (a choice, a number the type accepts, a name the command lists
    itself, a file): their refusal is a refused combination. Others are guesses (words of a message or of the
    help): a refusal that repeats the guess is a rejected value."""
    option = action.option_strings[-1]
    rest = without(base, set(action.option_strings)) if _takes_value(action) else \
        [w for w in base if w not in action.option_strings]
    if not _takes_value(action):
        return [(rest, True)] if current is not None else [(rest + [option], True)]
    kind = _type_name(action)
    guesses = []
    if action.choices is not None:
        values = [str(c) for c in action.choices if str(c) != current]
    elif kind in ("output_file", "figure_file"):
        values = [os.path.join(str(trial.work), "fuzz-out" + (".png" if kind == "figure_file" else ".csv"))]
    elif kind in NUMBER_TYPES:
        values = _number_candidates(action, current)
    else:
        code, _, message = trial.run(rest + [f"{option}={BOGUS}"])
        message = (message or "").replace(BOGUS, "") if code else ""
        values = [w for w in _listed(message) + _listed(action.help) + [str(trial.empty_file)]
                  if w != current and _accepts(action, w) is not None]
        guesses = [w for w in dict.fromkeys(PLAIN_TEXT + _words(message) + _words(action.help))
                   if w not in values and w != current and _accepts(action, w) is not None and not w.startswith("-")]
    values = list(dict.fromkeys(values))
    return ([(rest + [f"{option}={v}"], True) for v in values] +
            [(rest + [f"{option}={v}"], False) for v in guesses])[:MAX_TRIES]


def _refused(result, option: str, argv: list[str], trusted: bool) -> bool:
    """Exit status 2 with one line naming ``option`` (and, for a guessed value, not repeating it)."""
    value = argv[-1].partition("=")[2] if argv and argv[-1].startswith(option + "=") else ""
    line = result[2]
    return result[0] == 2 and line is not None and names_option(line, option) and (trusted or not _echoes(line, value))


def _effect(trial: Trial, option: str, baseline: list[str], variants, extra: list[str]) -> str | None:
    """"changed" or "refused" when a variant has an effect against ``baseline`` (both with ``extra``), else None."""
    base_result = trial.baseline(baseline + extra)
    if base_result[0] == 2:
        return None  # the base with these extras is itself refused: no comparison possible
    for variant, trusted in variants:
        result = trial.run(variant + extra)
        if result[0] == 2:
            if _refused(result, option, variant, trusted):
                return "refused"
            continue  # a value the command rejects: try the next one
        if trial.shown(result) != trial.shown(base_result):
            return "changed"
    return None


def _partners(parser, action, argv: list[str]) -> list[list[str]]:
    """Extra arguments the help of ``action`` names: other options (with a value their type accepts) and choices
    of other options, each not already on the command line."""
    text = action.help or ""
    out = []
    for other in parser._actions:
        if other is action or not other.option_strings or any(s in argv for s in other.option_strings) \
                or other.option_strings[-1] in ("-h", "--help"):
            continue
        named = any(re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", text) for s in other.option_strings)
        if other.choices is not None:
            for choice in other.choices:
                if str(choice) != str(other.default) and _echoes(text, str(choice)):
                    out.append([f"{other.option_strings[-1]}={choice}"])
        if named and not _takes_value(other):
            out.append([other.option_strings[-1]])
        elif named and _type_name(other) in NUMBER_TYPES:
            values = sorted(_number_candidates(other, None), key=float)  # spread over the accepted magnitudes
            spread = dict.fromkeys(values[round(i * (len(values) - 1) / 3)] for i in range(4)) if values else {}
            out += [[f"{other.option_strings[-1]}={v}"] for v in spread]
        elif named and other.choices is None:
            out += [[f"{other.option_strings[-1]}={w}"] for w in _words(other.help) if _accepts(other, w)][:3]
    return out


def judge_option(path: tuple[str, ...], option: str, tmp_path, monkeypatch) -> list[tuple[str | None, str]]:
    """(verdict or None for ignored, what was tried) for ``option`` on each representative command line of ``path``."""
    parser = PARSERS[path]
    action = _action(parser, option)
    json_flag = ["--json"] if option != "--json" and any("--json" in a.option_strings for a in parser._actions) else []
    out = []
    for index, raw in enumerate(REPRESENTATIVE[path]):
        trial = Trial(path, parser, tmp_path / str(index), monkeypatch)
        base = without(trial.fill(raw), exclusive_partners(parser, action))
        variants = _candidates(trial, action, base, _current(base, action))
        verdict = None
        if len(base) < len(raw) and variants:  # an exclusive partner was dropped: compare the option's values
            (base, trusted), variants = variants[0], variants[1:]
            if _refused(trial.run(base + json_flag), option, base, trusted):
                verdict = "refused"
        verdict = verdict or _effect(trial, option, base, variants, json_flag)
        if verdict is None and json_flag and _effect(trial, option, base, variants, []) is not None:
            verdict = "changed"
            STATS.setdefault("ignored_options_text_only", []).append(f"{' '.join(path)} {option}")
        if verdict is None:
            for extra in _partners(parser, action, base):
                if _effect(trial, option, base, variants, extra + json_flag) is not None:
                    verdict = "with partner"
                    break
        if verdict is None and (path, option) in ALLOWED:
            verdict = "allowed"
        out.append((verdict, f"ringlab {' '.join(path)} {' '.join(base)}: {option} is accepted and changes nothing "
                             f"(tried {len(variants)} values: {[v[-1] for v, _ in variants][:6]})"))
    return out


@pytest.mark.parametrize("path, option", CASES, ids=[" ".join(p) + " " + o for p, o in CASES])
def test_every_option_changes_something_or_is_refused(path, option, tmp_path, monkeypatch):
    results = judge_option(path, option, tmp_path, monkeypatch)
    verdicts = [verdict or "ignored" for verdict, _ in results]
    COUNTS.update(f"trial {v}" for v in verdicts)
    COUNTS[f"pair {next(v for v in VERDICTS[::-1] if v in verdicts)}"] += 1  # a pair counts as its worst line
    COUNTS["pairs"] += 1
    ignored = [what for verdict, what in results if verdict is None]
    assert not ignored, "\n".join(ignored) + "\napply the option, refuse it with a one-line error naming it, or " \
                                            "add it to ALLOWED with a reason"


def test_the_generator_finds_an_option_the_command_drops(tmp_path, monkeypatch):
    """Issue 31's first finding put back (``cost --topology dgx-h100`` dropping ``--intra``): the walk must call it
    ignored on the cluster command line and refused on the flat ones."""
    from ringlab.commands import cost

    original = cost._cluster

    def forgetful(args):
        args.intra = None
        return original(args)

    monkeypatch.setattr(cost, "_cluster", forgetful)
    verdicts = [verdict for verdict, _ in judge_option(("cost",), "--intra", tmp_path, monkeypatch)]
    assert verdicts == ["refused", None, "refused"]


def test_the_walk_reaches_the_options_issue_31_names():
    walked = set(CASES)
    assert {(("cost",), "--intra"), (("cost",), "--fabric"), (("calc", "train"), "--hardware")} <= walked
    assert len(CASES) >= 120
    assert all(key in walked for key in ALLOWED), "an ALLOWED entry names an option no parser has"


# --- the options this walk found ignored, and what became of them -------------------------------------------

_TRAIN = ["calc", "train", "--model", "mixtral-8x7b", "--seq-len", "4096", "--global-batch", "64", "--dp", "8",
          "--tp", "2", "--ep", "8"]
_COMM = ["calc", "comm", "--params", "7e9", "--world-size", "16"]
_GPUMON = ["gpumon", "--out", "@TMP@/g.csv", "--count", "1", "--interval", "0.1"]
_VERIFY_TOPOLOGY = ["verify", "--topology", "dgx-h100", "--numel", "8", "--nodes", "1", "--json"]
FOUND = [  # (command line refused, the two things its message must name)
    ([*_COMM, "--strategy", "fsdp_full_shard", "--gpus-per-node", "8"], "--gpus-per-node", "--strategy"),
    ([*_COMM, "--strategy", "ddp", "--alpha-us", "5"], "--alpha-us", "--bandwidth"),
    ([*_TRAIN, "--no-sync"], "--no-sync", "--zero"),
    ([*_TRAIN, "--efficiency", "0.5"], "--efficiency", "--topology"),
    ([*_TRAIN, "--vp", "2"], "--vp", "--pp"),
    (["check", "01a", "--all"], "--all", "exercise"),
    (["check", "--all", "--file", "x.py"], "--all", "--file"),
    ([*_GPUMON, "--backend", "smi", "--nvml-timeout", "3"], "--nvml-timeout", "--backend smi"),
    ([*_GPUMON, "--backend", "nvml", "--smi-timeout", "3"], "--smi-timeout", "--backend nvml"),
    (["practice", "--reveal"], "--reveal", "card"),
    (["practice", "--reveal", "05", "--random", "2"], "--reveal", "--random"),
    (["practice", "--reveal", "05", "--budget", "3"], "--budget", "session"),
    (["practice", "--budget", "3"], "--budget", "session"),
    (["bench", "--backend", "nccl", "--world-size", "2000", "--max-bytes", "64"], "--world-size", "--backend"),
    ([*_VERIFY_TOPOLOGY, "--input", "random"], "--input", "--topology"),
]
APPLIED = [  # (two command lines that differ only in the option, where it applies): outputs must differ
    ([*_COMM, "--strategy", "hybrid_shard", "--gpus-per-node", "8"], [*_COMM, "--strategy", "hybrid_shard",
                                                                      "--gpus-per-node", "4"]),
    ([*_COMM, "--strategy", "ddp", "--bandwidth", "50GB/s"], [*_COMM, "--strategy", "ddp", "--bandwidth", "50GB/s",
                                                               "--alpha-us", "500"]),
    ([*_TRAIN, "--zero", "fsdp_full_shard", "--global-batch", "256"],
     [*_TRAIN, "--zero", "fsdp_full_shard", "--global-batch", "256", "--no-sync"]),
    ([*_TRAIN, "--topology", "dgx-h100"], [*_TRAIN, "--topology", "dgx-h100", "--efficiency", "0.5"]),
    ([*_TRAIN, "--pp", "2", "--global-batch", "128"], [*_TRAIN, "--pp", "2", "--global-batch", "128", "--vp", "2"]),
    (_VERIFY_TOPOLOGY, [*_VERIFY_TOPOLOGY, "--seed", "3"]),
    (["serve-sim", "--seconds", "2", "--rate", "2", "--shared-prefix", "100"],
     ["serve-sim", "--seconds", "2", "--rate", "2", "--shared-prefix", "100", "--no-prefix-caching"]),
]


@pytest.mark.parametrize("argv, first, second", FOUND, ids=[" ".join(a[:2]) + " " + f for a, f, _ in FOUND])
def test_found_combinations_are_refused_naming_both(argv, first, second, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    outcome = run_cli([a.replace("@TMP@", str(tmp_path)) for a in argv], timeout=CALL_LIMIT)
    lines = [line for line in outcome.err.splitlines() if line.strip()]
    assert outcome.code == 2 and len(lines) == 1 and outcome.error is None, outcome.describe()
    assert first in lines[0] and second in lines[0], lines[0]


@pytest.mark.parametrize("without_option, with_option", APPLIED, ids=[" ".join(b[len(a):]) for a, b in APPLIED])
def test_found_options_still_apply_where_they_mean_something(without_option, with_option):
    before, after = run_cli(without_option, timeout=CALL_LIMIT), run_cli(with_option, timeout=CALL_LIMIT)
    assert before.code == after.code == 0, (before.describe(), after.describe())
    assert before.out != after.out
