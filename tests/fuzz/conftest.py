"""Prints the fuzz counts (kinds of bad input, outcomes, faults survived) at the end of a run."""

import pytest
from cli_harness import OUTCOMES, STATS


def pytest_terminal_summary(terminalreporter):
    if not STATS["calls"]:
        return
    counts = ", ".join(f"{name} {STATS['outcomes'][name]}" for name in OUTCOMES)
    judged = sum(STATS["outcomes"].values())
    terminalreporter.write_line(f"ringlab fuzz: {STATS['calls']} CLI calls; {judged} judged, "
                                f"{len(STATS['kinds'])} kinds of bad input: {counts}; "
                                f"{STATS['json_documents']} --json documents parsed strictly")
    codes = STATS.get("extreme_exit_codes")
    if codes:
        terminalreporter.write_line(f"ringlab fuzz: {sum(codes.values())} calls with an extreme number, by exit "
                                    f"status: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items(), key=str)))
    guards = STATS.get("guards")
    if guards:
        terminalreporter.write_line("ringlab fuzz (resource guards): " + ", ".join(f"{k} {v}" for k, v in guards.items()))
    ignored = STATS.get("ignored_options")
    if ignored:
        verdicts = STATS["ignored_options_verdicts"]
        pairs = ", ".join(f"{v} {ignored[f'pair {v}']}" for v in verdicts)
        trials = ", ".join(f"{v} {ignored[f'trial {v}']}" for v in verdicts)
        terminalreporter.write_line(f"ringlab fuzz (silently ignored options): {ignored['pairs']} (command, option) "
                                    f"pairs, each by its weakest command line: {pairs}; by representative command line: {trials}; "
                                    f"{ignored['calls']} calls")
        text_only = STATS.get("ignored_options_text_only", [])
        if text_only:
            terminalreporter.write_line("  changed the text but not the --json document: " + ", ".join(text_only))
        allowed = STATS.get("ignored_options_allowed") or {}
        for (path, option), reason in allowed.items():
            terminalreporter.write_line(f"  allowed: {' '.join(path)} {option}: {reason}")
        if not allowed:
            terminalreporter.write_line("  allowed without a change or a refusal: none")


@pytest.fixture(autouse=True)
def _fuzz_in_scratch_dir(tmp_path_factory, monkeypatch):
    """Run every fuzzed command in a scratch directory: a mutated command line may turn a value into a relative
    path (``shards write --dir 2``), and whatever it writes must not land in the checkout."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
