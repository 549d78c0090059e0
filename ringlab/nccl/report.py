"""Put it together: per run, the facts, the ceiling, the alpha-beta fit, the findings, as JSON and as text.

Bandwidths leave this module in bytes/s (``peak_busbw``, ``expected_busbw``, ``alpha_beta.bandwidth``);
nccl-tests prints GB/s (1e9 B/s), which the text report keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringlab import textfmt

from .ceiling import MODELLED, ceiling_busbw
from .debuglog import LogFacts
from .facts import Facts, infer
from .findings import Finding, findings_for
from .fit import AlphaBeta, fit_alpha_beta
from .reader import Document
from .records import Run
from .tuning.explained import expectations, text_lines, with_knobs

MALFORMED_SHOWN = 5  # malformed rows named in a report (all are counted)


@dataclass
class Report:
    """The explanation of one run."""

    source: str
    run: Run
    facts: Facts
    log: LogFacts
    peak_busbw: float | None  # B/s
    expected_busbw: float | None  # B/s
    ceiling_explanation: str
    fit: AlphaBeta | None
    findings: list[Finding]
    unknown_lines: int
    malformed_lines: int
    lines_read: int

    @property
    def efficiency(self) -> float | None:
        if self.peak_busbw is None or not self.expected_busbw:
            return None
        return self.peak_busbw / self.expected_busbw

    @property
    def correctness_failure(self) -> bool:
        return any(f.id == "correctness-failure" for f in self.findings)

    def as_dict(self) -> dict:
        """The JSON form: the keys of issue 23 first, then detail."""
        f = self.facts
        fit = None if self.fit is None else {"alpha_s": self.fit.alpha, "bandwidth_Bps": self.fit.bandwidth,
                                             "crossover_bytes": self.fit.crossover, "points": self.fit.points,
                                             "max_relative_residual": self.fit.max_relative_residual}
        return {
            "collective": f.collective, "nodes": f.nodes, "gpus_per_node": f.gpus_per_node,
            "world_size": f.world_size, "gpu": f.gpu,
            "transports": {"intra_node": f.intra_node, "inter_node": f.inter_node},
            "peak_busbw": self.peak_busbw, "expected_busbw": self.expected_busbw, "efficiency": self.efficiency,
            "findings": [x.as_dict() for x in self.findings],
            "source": self.source, "implementation": self.run.implementation, "versions": f.versions, "channels": f.channels, "graphs": f.graphs,
            "algorithms": f.algorithms,
            "nccl_expected": [e.as_dict() for e in expectations(self.log, self.run, f.collective)],
            "nics": f.nics, "nic_layer": f.nic_layer, "nic_bandwidth": f.nic_bandwidth, "hosts": f.hosts,
            "ceiling": self.ceiling_explanation, "alpha_beta": fit, "notes": f.notes,
            "rows": [{"size": r.size, "count": r.count, "type": r.dtype, "redop": r.redop, "root": r.root,
                      **{k: None if m is None else {"time_s": m.time_us * 1e-6, "algbw": m.algbw * 1e9,
                                                    "busbw": m.busbw * 1e9, "wrong": m.wrong}
                         for k, m in (("out_of_place", r.out_of_place), ("in_place", r.in_place))}}
                     for r in self.run.rows],
            "lines": {"read": self.lines_read, "unknown": self.unknown_lines, "malformed": self.malformed_lines,
                      "truncated_rows": self.run.truncated.total, "nccl_log": self.log.lines,
                      "rows_read": self.run.rows_read, "rows_folded": self.run.rows_read - len(self.run.rows)},
            "malformed_rows": [{"line": line.where(), "why": why} for line, why in self.run.malformed[:MALFORMED_SHOWN]],
        }

    def text(self, width: int | None = None) -> str:
        """A short human report; with ``width`` (the command line's 100 columns) sentences wrap at it
        and quoted input lines are cut to it ("..." marks the cut; ``as_dict`` keeps them whole)."""
        f = self.facts
        shape = ", ".join(x for x in (
            f.collective or "collective unknown",
            f"{f.world_size} ranks" if f.world_size else "ranks unknown",
            f"{f.nodes} node(s)" if f.nodes else None,
            f"{f.gpus_per_node} GPU(s)/node" if f.gpus_per_node else None,
            f.gpu) if x)
        named = f" [{self.run.implementation}]" if self.run.implementation else ""
        lines = [f"{self.source}{named}: {shape}"]
        if f.versions:
            lines.append("  versions: " + ", ".join(f"{k} {v}" for k, v in sorted(f.versions.items())))
        alone = f.gpus_per_node == 1
        lines.append(f"  transports: intra-node {', '.join(f.intra_node) or ('-' if alone else 'not in the log')}; "
                     f"inter-node {', '.join(f.inter_node) or ('not in the log' if (f.nodes or 1) > 1 else '-')}")
        if f.channels or f.graphs or f.algorithms:
            lines.append(f"  channels: {f.channels or '?'}; graphs built: {', '.join(f.graphs) or '-'}; "
                         f"algorithms chosen (TUNING): {', '.join(f.algorithms) or 'not in the log'}")
        lines += text_lines(expectations(self.log, self.run, f.collective))
        if self.peak_busbw is not None:
            top = max(self.run.rows, key=lambda r: r.busbw)
            lines.append(f"  peak busbw {self.peak_busbw / 1e9:.2f} GB/s at {top.size:,} B")
        if self.expected_busbw:
            share = f"; efficiency {self.efficiency:.0%}" if self.efficiency is not None else ""
            lines.append(f"  ceiling {self.expected_busbw / 1e9:g} GB/s{share}: {self.ceiling_explanation}")
        else:
            lines.append(f"  ceiling: {self.ceiling_explanation}")
        if self.fit is not None:
            lines.append(f"  alpha-beta fit: alpha {self.fit.alpha * 1e6:.1f} us, asymptotic algbw "
                         f"{self.fit.bandwidth / 1e9:.2f} GB/s, latency-bound below {self.fit.crossover:,.0f} B")
        for note in f.notes:
            lines.append(f"  note: {note}")
        lines.append("  findings:" if self.findings else "  findings: none")
        for x in self.findings:
            lines.append(f"    [{x.id}] {x.message}")
            if x.evidence:
                lines.append(_quoted(x.evidence, self.source, width))
        folded = self.run.rows_read - len(self.run.rows)
        if folded:
            lines.append(f"  {folded:,} row(s) repeat a size already read (cycles): each size shows its best "
                         "measurement, or a failed one")
        if self.unknown_lines or self.malformed_lines or self.run.truncated.total:
            lines.append(f"  ignored: {self.unknown_lines:,} unrecognised line(s), {self.malformed_lines:,} malformed "
                         f"row(s), {self.run.truncated.total:,} truncated row(s)")
        for line, why in self.run.malformed[:MALFORMED_SHOWN]:
            lines.append(f"    malformed row {line.where()}: {why}")
        if width is not None and len(lines[0]) > width:  # a long path: the run's shape goes on a line of its own
            lines[0:1] = [f"{self.source}{named}:", f"  {shape}"]
        return "\n".join(lines) if width is None else textfmt.wrap_lines("\n".join(lines), width=width)


def _quoted(evidence: str, source: str, width: int | None) -> str:
    """A finding's evidence (``file:line: text``) indented; with ``width``, the report's own file is named
    by its line number alone and the quote is cut to ``width`` columns."""
    if width is None:
        return f"        {evidence[:200]}"
    if evidence.startswith(source + ":"):
        evidence = "line " + evidence[len(source) + 1:]
    text = f"        {evidence}"
    return text if len(text) <= width else text[:width - 3] + "..."


def _no_ceiling_reason(facts: Facts) -> str:
    if not facts.world_size or facts.world_size < 2:
        return "none: fewer than two ranks"
    if facts.collective not in MODELLED:
        return f"unknown: no line-rate model for {facts.collective or 'an unknown collective'}"
    if (facts.nodes or 1) > 1 and not (facts.nics and facts.nic_bandwidth):
        return ("unknown: a multi-node bound needs the NICs in use and their line rate (from NCCL_DEBUG=INFO, "
                "or --nics and --nic-gbps)")
    return f"unknown: no line rate known for {facts.gpu or 'this GPU'}"


def explain(doc: Document, nics: int | None = None, nic_gbps: float | None = None) -> list[Report]:
    """One :class:`Report` per run of ``doc`` (a log with no table gives one report with no rows).

    ``nics`` / ``nic_gbps`` override the NICs in use per node and their line rate (Gb/s) for the
    multi-node ceiling. Raises ValueError for non-positive overrides.
    """
    runs = doc.runs or [Run(start=doc.log_lines[0] if doc.log_lines else None)]
    reports = []
    for run in runs:
        log = LogFacts()
        for line in run.log_lines + doc.log_lines:
            log.add(line)
        facts = infer(run, log, nics=nics, nic_gbps=nic_gbps)
        peak = max(r.busbw for r in run.rows) * 1e9 if run.rows else None
        bound = ceiling_busbw(facts, peak)
        expected, why = (bound if bound else (None, _no_ceiling_reason(facts)))
        halves = [(r.size, m.time_us * 1e-6) for r in run.rows for m in (r.out_of_place or r.in_place,) if m]
        fit = fit_alpha_beta([s for s, _ in halves], [t for _, t in halves]) if halves else None
        source = run.start.source if run.start else "<input>"
        reports.append(Report(source, run, facts, log, peak, expected, why, fit,
                              with_knobs(findings_for(run, facts, log, doc.commands, peak, expected, fit)),
                              doc.unknown.total, doc.malformed.total, doc.lines))
    return reports
