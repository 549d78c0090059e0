"""Prints the fuzz counts (kinds of bad input, outcomes, faults survived) at the end of a run."""

from cli_harness import OUTCOMES, STATS


def pytest_terminal_summary(terminalreporter):
    if not STATS["calls"]:
        return
    counts = ", ".join(f"{name} {STATS['outcomes'][name]}" for name in OUTCOMES)
    judged = sum(STATS["outcomes"].values())
    terminalreporter.write_line(f"ringlab fuzz: {STATS['calls']} CLI calls; {judged} with a bad value, "
                                f"{len(STATS['kinds'])} kinds of bad input: {counts}; "
                                f"{STATS['json_documents']} --json documents parsed strictly")
