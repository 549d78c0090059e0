"""Findings: what a run's numbers and log say is wrong or worth knowing, each with a stable id and its evidence.

Ids (stable; scripts may match on them), in the order reported:

``correctness-failure``  #wrong > 0 (or an old version's error flagged, or ``Out of bounds values : N FAILED``)
``test-aborted``         nccl-tests printed ``Test failure`` / ``Test NCCL failure`` / ``Test CUDA failure``
``malformed-rows``       every result row is malformed (NaN, infinite or negative values, wrong column count)
``no-results``           no result rows (the paste stops before the table, or the run hung)
``single-rank``          one rank: nothing crosses a link, busbw is 0 by definition
``net-socket``           inter-node traffic over NET/Socket (kernel TCP), not IB/RoCE RDMA, EFA or TCPX
``no-gdrdma``            an RDMA-capable NIC used without GPUDirect RDMA: data staged through host memory
``p2p-disabled-shm``     GPUs in a node talk through host shared memory (SHM), P2P off or unavailable
``few-channels``         NCCL limited to few channels (rings) by the environment, or few on NVLink
``unused-nics``          fewer NICs carry traffic than NCCL lists
``nccl-warning``         NCCL printed a WARN line (each distinct message once, at most three)
``low-efficiency``       the plateau busbw is below half the line-rate ceiling
``above-ceiling``        busbw above the line-rate ceiling (NVLS, a 2-node tree, or a misjudged link class)
``no-plateau``           busbw still rising at the largest size: the plateau was not reached
``busbw-factor``         printed busbw/algbw does not match nccl-tests' factor for the inferred collective
``iteration-spikes``     with ``-I 1``: an iteration took 1.5x the average or more (:mod:`ringlab.nccl.iterations`)
``straggler``            with ``-I 1 -J``: one process is the slowest, by over 10%, at most sizes
``latency-bound``        sizes below the alpha-beta crossover are dominated by per-call latency

The half-of-ceiling threshold for ``low-efficiency`` is deliberately loose: healthy runs sit near
80% of line rate (NCCL's protocol overhead is about 20%, S. Jeaugey in NVIDIA/nccl-tests#212), so a
plateau under 50% is a fault, not tuning.
"""

from __future__ import annotations

from dataclasses import dataclass

from .debuglog import LogFacts
from .facts import Facts
from .fit import AlphaBeta
from .iterations import SPIKE_FACTOR, spikes, straggler
from .lines import Line
from .records import Run

LOW_EFFICIENCY = 0.5
ABOVE_CEILING = 1.05
FEW_CHANNELS_ENV = 4  # NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS at or below this
MAX_WARNINGS = 3
FEW_CHANNELS_NVLINK = 8  # rings on one NVLink node; NCCL chooses 16-32 on NVLink systems (fixtures: 16, 24)


@dataclass(frozen=True)
class Finding:
    """``id`` from the list above, a sentence, and the input line that shows it (``source:line: text``)."""

    id: str
    message: str
    evidence: str

    def as_dict(self) -> dict:
        return {"id": self.id, "message": self.message, "evidence": self.evidence}


def _ev(line: Line | None) -> str:
    return f"{line.where()}: {line.raw.strip()}" if line is not None else ""


def _correctness(run: Run) -> list[Finding]:
    bad = [r for r in run.rows if r.failed]
    if bad:
        sizes = ", ".join(f"{r.size:,} B" for r in bad[:4]) + (" ..." if len(bad) > 4 else "")
        wrong = sum(m.wrong or 0 for r in bad for m in r.measures())
        counted = f"{wrong:,} wrong elements" if wrong else "errors over threshold"
        return [Finding("correctness-failure", f"wrong results at {len(bad)} size(s) ({sizes}; {counted}): "
                        "a correctness failure; no bandwidth figure of this run can be trusted until it is fixed",
                        _ev(bad[0].line))]
    if run.out_of_bounds:
        footer = next((ln for ln in run.footer_lines if "Out of bounds" in ln.text), None)
        return [Finding("correctness-failure", f"{run.out_of_bounds} out-of-bounds values: nccl-tests found wrong "
                        "results (older versions print the largest error per row, not a count)", _ev(footer))]
    return []


def _env_line(log: LogFacts, commands: list[Line], name: str) -> tuple[str, Line] | None:
    if name in log.env:
        return log.env[name]
    for line in commands:
        for token in line.text.split():
            if token.startswith(name + "="):
                return token.split("=", 1)[1], line
    return None


def _transport_findings(facts: Facts, log: LogFacts, commands: list[Line]) -> list[Finding]:
    out = []
    multi = (facts.nodes or 1) > 1
    if multi and "Socket" in facts.inter_node:
        out.append(Finding("net-socket", "inter-node traffic goes over NET/Socket: TCP through the kernel, not "
                           "IB/RoCE RDMA or EFA; check that the RDMA libraries (libibverbs, the OFI plugin) load "
                           "and that NCCL_IB_DISABLE / NCCL_NET are not set", _ev(facts.evidence.get("transport:Socket"))))
    for label in facts.inter_node:
        if label.split("+")[0] in ("IB", "RoCE", "EFA", "OFI") and "+GDRDMA" not in label:
            if f"{label}+GDRDMA" in facts.inter_node:
                continue
            out.append(Finding("no-gdrdma", f"{label} without GPUDirect RDMA: every inter-node byte is staged "
                               "through host memory (check nvidia-peermem / DMA-BUF, NCCL_NET_GDR_LEVEL and the "
                               "PCIe path between GPU and NIC)", _ev(facts.evidence.get(f"transport:{label}"))))
            break
    p2p_off = _env_line(log, commands, "NCCL_P2P_DISABLE")
    shm_only = "SHM" in facts.intra_node and not any(t.startswith("P2P") for t in facts.intra_node)
    if shm_only or (p2p_off and p2p_off[0] == "1") or log.p2p_support is False:
        line = (facts.evidence.get("transport:SHM") if shm_only else None) or (p2p_off[1] if p2p_off else None) \
            or (log.p2p_lines[0] if log.p2p_lines else None)
        out.append(Finding("p2p-disabled-shm", "GPU peer-to-peer is off or unavailable: traffic between GPUs of a "
                           "node goes through host shared memory (SHM) or the network (NCCL_P2P_DISABLE, an IOMMU "
                           "not in passthrough, or GPUs without P2P support)", _ev(line)))
    for name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS"):
        found = _env_line(log, commands, name)
        if found and found[0].isascii() and found[0].isdigit() and int(found[0]) <= FEW_CHANNELS_ENV:
            out.append(Finding("few-channels", f"{name}={found[0]}: NCCL may run at most {found[0]} rings, too few to "
                               "fill fast links (each channel is one CUDA block driving one ring)", _ev(found[1])))
            break
    else:
        if (facts.channels and facts.channels < FEW_CHANNELS_NVLINK and not multi
                and any(t.endswith("NVLink") for t in facts.intra_node)):
            out.append(Finding("few-channels", f"{facts.channels} channels on an NVLink node, where NCCL normally "
                               "builds 16 or more: fewer rings than links leave NVLink bandwidth unused",
                               _ev(facts.evidence.get("channels"))))
    if multi and log.ib_devices and facts.nics and facts.nics < len(log.ib_devices):
        out.append(Finding("unused-nics", f"NCCL lists {len(log.ib_devices)} NICs but traffic uses {facts.nics}: "
                           "check NCCL_IB_HCA and the GPU-NIC affinity", _ev(log.ib_lines[0])))
    return out


def findings_for(run: Run, facts: Facts, log: LogFacts, commands: list[Line], peak: float | None,
                 ceiling: float | None, fit: AlphaBeta | None) -> list[Finding]:
    """All findings of one run in the order of the module docstring. ``peak`` and ``ceiling`` in B/s."""
    out = _correctness(run)
    if run.failures:
        out.append(Finding("test-aborted", "nccl-tests reported an error and stopped or failed the run",
                           _ev(run.failures[0])))
    if not run.rows and run.malformed.total:
        line, why = run.malformed[0]
        out.append(Finding("malformed-rows", f"all {run.malformed.total:,} result row(s) are malformed; the first, "
                           f"line {line.number}: {why}", _ev(line)))
    elif not run.rows:
        out.append(Finding("no-results", "no result rows: the output stops before the table (a hang, a crash, or "
                           "a truncated paste)", _ev(run.truncated[0] if run.truncated else run.start)))
    if facts.world_size == 1:
        out.append(Finding("single-rank", "one rank: nothing crosses a link, so busbw = algbw x 0 = 0 by definition; "
                           "run with 2 or more GPUs to measure a fabric", _ev(facts.evidence.get("world_size"))))
    out += _transport_findings(facts, log, commands)
    seen: set[str] = set()
    for line in log.warnings:
        message = line.text.split("NCCL WARN", 1)[-1].strip()
        if message not in seen and len(seen) < MAX_WARNINGS:
            seen.add(message)
            out.append(Finding("nccl-warning", f"NCCL warned: {message[:160]}", _ev(line)))
    top = max(run.rows, key=lambda r: r.busbw) if run.rows else None
    ordered = sorted(run.rows, key=lambda r: r.size)
    rising = len(ordered) < 3 or (ordered[-1].busbw > 1.1 * ordered[-2].busbw)
    if ordered and rising:
        why = (f"only {len(ordered)} size(s)" if len(ordered) < 3 else "busbw is still rising at the largest size")
        out.append(Finding("no-plateau", f"{why}: the plateau was not reached; run larger messages (-e) before "
                           "judging efficiency", _ev(ordered[-1].line)))
    if peak and ceiling and top is not None:
        ratio = peak / ceiling
        if ratio < LOW_EFFICIENCY and not rising:
            out.append(Finding("low-efficiency", f"plateau busbw {peak / 1e9:.2f} GB/s is {ratio:.0%} of the "
                               f"{ceiling / 1e9:g} GB/s line-rate ceiling; healthy runs reach about 80%",
                               _ev(top.line)))
        elif ratio > ABOVE_CEILING:
            out.append(Finding("above-ceiling", f"busbw {peak / 1e9:.2f} GB/s exceeds the {ceiling / 1e9:g} GB/s "
                               "line-rate ceiling ({:.0%}): NVLS in-switch reduction, a 2-node tree, or a link class "
                               "faster than the one assumed (an NVLink bridge on PCIe cards)".format(ratio),
                               _ev(top.line)))
    for note in facts.notes:
        if note.startswith("busbw/algbw is"):
            out.append(Finding("busbw-factor", note, _ev(top.line if top else None)))
    out += _iteration_findings(run)
    if fit is not None and run.rows:
        small = min(run.rows, key=lambda r: r.size)
        out.append(Finding("latency-bound", f"below about {_bytes(fit.crossover)} the run is latency-bound: "
                           f"alpha ~ {fit.alpha * 1e6:.1f} us per call, so busbw there measures latency, not "
                           "links", _ev(small.line)))
    return out


def _iteration_findings(run: Run) -> list[Finding]:
    """Spikes and a straggler from nccl-tests' per-iteration timing (-I 1), when the run has it."""
    out = []
    found = spikes(run)
    if found:
        worst = found[0]
        out.append(Finding("iteration-spikes", f"{len(found)} result half(s) had an iteration {SPIKE_FACTOR:g}x the "
                           f"average or slower; worst {worst.ratio:.1f}x at {worst.row.size:,} B ({worst.half}): "
                           "interrupts, a noisy neighbour or a retransmitting link (see which process with -J)",
                           _ev(worst.row.line)))
    slow = straggler(run)
    if slow:
        process, hits, sizes, margin = slow
        out.append(Finding("straggler", f"process {process} is the slowest at {hits} of {sizes} sizes, up to "
                           f"{margin:.0%} above the median process: every collective waits for it (its GPU, NIC "
                           "or host)", _ev(run.rows[0].line if run.rows else None)))
    return out


def _bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
