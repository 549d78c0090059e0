"""Pipeline-parallel bubbles: closed forms and a simulated schedule grid.

A pipeline of ``stages`` (P) devices trains on ``microbatches`` (M) micro-batches per
optimizer step. Each device idles at the start (waiting for the first forward to reach it)
and at the end (waiting for the last backward): that idle time is the *bubble*.

Time conventions (all per micro-batch, per pipeline stage, for the whole stage even when it
is split into virtual chunks -- except in :func:`pipeline_schedule`, see there):

- ``t_f``: forward pass.
- ``t_b``: backward pass for the *input* gradient (the part the previous stage waits for).
- ``t_w``: backward pass for the *weight* gradient.

GPipe, 1F1B and interleaved 1F1B run the backward as one op lasting ``t_b + t_w``; ZB-H1
splits it into B and W ops (Qi et al. 2023). The defaults ``t_f = t_b = t_w = 1`` give the
usual "backward = 2 x forward" and the equal-times case of the zero-bubble paper.

Closed forms (bubble per device, compute per device, for uniform op times):

=================  ====================================  =========================
schedule           bubble time                           ideal compute time
=================  ====================================  =========================
gpipe, 1f1b        (P-1) (t_f + t_b + t_w)               M (t_f + t_b + t_w)
interleaved-1f1b   (P-1) (t_f + t_b + t_w) / v           M (t_f + t_b + t_w)
zb-h1 (M >= P)     (P-1) max(t_f, t_b, t_f + t_b - t_w)  M (t_f + t_b + t_w)
=================  ====================================  =========================

``relative_to="ideal"`` divides the bubble by the ideal compute time, giving (P-1)/M for
GPipe and 1F1B (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", sec. 2.2); ``relative_to="total"`` divides it by the wall clock
(bubble + compute), giving (P-1)/(M+P-1) (Huang et al. 2019, GPipe).

ZB-H1, as simulated here: stage i (0-based) runs rounds x = 0 .. M+P-2; round x holds F of
micro-batch x, B of micro-batch x-(P-1-i) and W of micro-batch x-(P-1), each only if that
micro-batch exists (the ordering of Qi et al. 2023, fig. 3; on stage 0 every B is followed by
its own W, as in 1F1B). Each stage does M (t_f + t_b + t_w) of work, and three dependency
chains bound the step time T from below:

(a) F of micro-batch 0 crosses P-1 stages, then the last stage runs all its work:
    T >= (P-1) t_f + M (t_f + t_b + t_w);
(b) F then B of micro-batch 0 cross the whole pipeline and back before stage 0 runs the rest
    of its work: T >= (P-1) t_b + M (t_f + t_b + t_w);
(c) the last stage runs everything up to B of micro-batch M-1 (all but its last P W ops),
    that B crosses P-1 stages down, and stage 0 runs the final W:
    T >= (P-1)(t_f + t_b - t_w) + M (t_f + t_b + t_w).

So the bubble per device is at least (P-1) max(t_f, t_b, t_f + t_b - t_w), and the simulation
attains it exactly whenever M >= P (tested over ranges of P, M and all three times). When
t_w <= min(t_f, t_b), chain (c) binds and the bubble is the paper's (P-1)(t_f + t_b - t_w):
B ops travel down without waiting for W, and the W ops fill what was the cooldown bubble.
With t_f = t_b = t_w that is (P-1) t_f, one third of 1F1B's (P-1)(t_f + t_b + t_w). Every
stage then holds up to P un-finished micro-batches (1F1B's stage-0 peak), so peak activation
memory matches 1F1B. For M < P the W ops cannot fill the tail and no closed form is given.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ringlab.validation import check_number

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1")
RELATIVE_TO = ("ideal", "total")

# Codes of the grid returned by pipeline_schedule.
IDLE, FORWARD, BACKWARD, WEIGHT = 0, 1, 2, 3
SLOT_LEGEND = {IDLE: ".", FORWARD: "F", BACKWARD: "B", WEIGHT: "W"}


def _check_choice(name: str, value, choices) -> str:
    if value not in choices:
        close = difflib.get_close_matches(str(value), choices, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}{hint}")
    return value


def check_pipeline_setup(stages, microbatches, schedule, virtual_stages) -> tuple[int, int, str, int]:
    """``(p, m, schedule, v)`` checked: whole numbers >= 1 and a known schedule. Raises TypeError/ValueError
    naming the argument and the accepted values."""
    p = check_number("stages", stages, 1, integer=True)
    m = check_number("microbatches", microbatches, 1, integer=True)
    schedule = _check_choice("schedule", schedule, SCHEDULES)
    v = check_number("virtual_stages", virtual_stages, 1, integer=True)
    if schedule == "interleaved-1f1b":
        # Megatron-LM's interleaved schedule walks micro-batches in groups of P.
        if m % p:
            raise ValueError(
                f"interleaved-1f1b needs microbatches divisible by stages (Megatron-LM requirement); "
                f"got microbatches={m}, stages={p}"
            )
    elif v != 1:
        raise ValueError(f"virtual_stages > 1 needs schedule='interleaved-1f1b'; got schedule={schedule!r}")
    return p, m, schedule, v


def bubble_time(stages: int, microbatches: int, schedule: str = "1f1b", virtual_stages: int = 1,
                t_f: float = 1.0, t_b: float = 1.0, t_w: float = 1.0) -> tuple[float, float]:
    """Closed-form ``(bubble, ideal)`` idle and busy time per device for one optimizer step.

    Units are those of ``t_f``, ``t_b``, ``t_w`` (see the module docstring for the table and
    its sources). Raises ValueError/TypeError on non-positive sizes or times, unknown
    schedules, ``virtual_stages != 1`` outside interleaved-1f1b, ``microbatches`` not a
    multiple of ``stages`` for interleaved-1f1b, and ``microbatches < stages`` for zb-h1
    (where no closed form is given; simulate with :func:`pipeline_schedule`).
    """
    p, m, schedule, v = check_pipeline_setup(stages, microbatches, schedule, virtual_stages)
    t_f, t_b, t_w = (check_number(n, t, strict=True) for n, t in (("t_f", t_f), ("t_b", t_b), ("t_w", t_w)))
    ideal = m * (t_f + t_b + t_w)
    if schedule == "zb-h1":
        if m < p:
            raise ValueError(
                f"the zb-h1 closed form needs microbatches >= stages; got microbatches={m}, stages={p} "
                f"(simulate it with pipeline_schedule instead)"
            )
        return (p - 1) * max(t_f, t_b, t_f + t_b - t_w), ideal
    return (p - 1) * (t_f + t_b + t_w) / v, ideal


def bubble_fraction(stages: int, microbatches: int, schedule: str = "1f1b", virtual_stages: int = 1,
                    relative_to: Literal["ideal", "total"] = "ideal",
                    t_f: float = 1.0, t_b: float = 1.0, t_w: float = 1.0) -> float:
    """Pipeline bubble as a fraction, closed form.

    ``relative_to="ideal"``: bubble / ideal compute, (P-1)/M for gpipe and 1f1b, (P-1)/(vM)
    for interleaved-1f1b (Narayanan et al. 2021, sec. 2.2), (P-1) max(t_f, t_b, t_f+t_b-t_w) /
    (M (t_f+t_b+t_w)) for zb-h1 (derived in the module docstring; Qi et al. 2023, sec. 3, give
    (P-1)(t_f+t_b-t_w), the case t_w <= min(t_f, t_b)), i.e. (P-1)/(3M) when all times are equal.
    ``relative_to="total"``: bubble / (bubble + compute), (P-1)/(M+P-1) for gpipe and 1f1b.
    Example: P=8, M=16, 1f1b -> 0.4375 (ideal), 7/23 = 0.3043 (total).

    Times only matter for zb-h1 (the others scale with them). Errors as :func:`bubble_time`,
    plus ValueError for an unknown ``relative_to``.
    """
    _check_choice("relative_to", relative_to, RELATIVE_TO)
    bubble, ideal = bubble_time(stages, microbatches, schedule, virtual_stages, t_f, t_b, t_w)
    return bubble / ideal if relative_to == "ideal" else bubble / (bubble + ideal)


def _interleaved_warmup(p: int, m: int, v: int, stage: int) -> int:
    # Megatron-LM forward_backward_pipelining_with_interleaving: warm-up forward chunks.
    return min((p - stage - 1) * 2 + (v - 1) * p, m * v)


def peak_in_flight(stages: int, microbatches: int, schedule: str = "1f1b",
                   virtual_stages: int = 1) -> np.ndarray:
    """Closed-form peak number of micro-batches whose activations a stage holds at once.

    Returns an int64 array of shape ``(stages,)``. A micro-batch is held from the start of
    its forward until its last backward op ends (B, or W for zb-h1, since the weight gradient
    needs the stored inputs). gpipe: M on every stage (Huang et al. 2019); 1f1b: min(P-i, M)
    on stage i (Narayanan et al. 2021); zb-h1: min(P, M) on every stage, so its peak equals
    1F1B's (Qi et al. 2023); interleaved-1f1b: counted in (micro-batch, chunk) pairs, each
    1/v of a stage's activations: min(2(P-i-1) + (v-1)P + 1, vM) (Megatron-LM warm-up count
    plus the first steady-state forward). Errors as :func:`bubble_time`.
    """
    p, m, schedule, v = check_pipeline_setup(stages, microbatches, schedule, virtual_stages)
    stage = np.arange(p)
    if schedule == "gpipe":
        return np.full(p, m, dtype=np.int64)
    if schedule == "1f1b":
        return np.minimum(p - stage, m).astype(np.int64)
    if schedule == "zb-h1":
        return np.full(p, min(p, m), dtype=np.int64)
    return np.array([min(_interleaved_warmup(p, m, v, i) + 1, m * v) for i in stage], dtype=np.int64)


# ---------------------------------------------------------------------------------------
# Simulation. An op is (kind, micro-batch, chunk); each stage runs its ops in the order the
# schedule prescribes, and each op starts when the stage is free and its inputs exist.
# ---------------------------------------------------------------------------------------

def stage_op_orders(p: int, m: int, schedule: str, v: int) -> list[list[tuple[int, int, int]]]:
    """Per stage, the ordered list of (kind, micro-batch, chunk) ops the schedule runs."""
    orders = []
    for i in range(p):
        ops: list[tuple[int, int, int]] = []
        if schedule == "gpipe":
            ops += [(FORWARD, x, 0) for x in range(m)] + [(BACKWARD, x, 0) for x in range(m)]
        elif schedule in ("1f1b", "zb-h1"):
            # Round x: F of x, B of x-(P-1-i), and for zb-h1 W of x-(P-1) (see module docstring).
            for x in range(m + p - 1):
                for kind, mb in ((FORWARD, x), (BACKWARD, x - (p - 1 - i)), (WEIGHT, x - (p - 1))):
                    if 0 <= mb < m and (kind != WEIGHT or schedule == "zb-h1"):
                        ops.append((kind, mb, 0))
        else:
            total, warm = m * v, _interleaved_warmup(p, m, v, i)

            def chunk_op(kind: int, k: int) -> tuple[int, int, int]:
                # Megatron-LM: virtual micro-batch k -> (micro-batch, model chunk); groups of P
                # micro-batches pass through chunk 0, then chunk 1, ...; backward walks chunks back.
                chunk = (k % (p * v)) // p
                return kind, (k // (p * v)) * p + k % p, chunk if kind == FORWARD else v - 1 - chunk

            ops += [chunk_op(FORWARD, k) for k in range(warm)]
            for k in range(total - warm):
                ops += [chunk_op(FORWARD, warm + k), chunk_op(BACKWARD, k)]
            ops += [chunk_op(BACKWARD, k) for k in range(total - warm, total)]
        orders.append(ops)
    return orders


def op_dependency(op: tuple[int, int, int], stage: int, p: int, v: int) -> tuple[tuple[int, int, int], int] | None:
    """The (op, stage) that must finish before ``op`` can start on ``stage``, if any."""
    kind, mb, chunk = op
    if kind == WEIGHT:
        return (BACKWARD, mb, chunk), stage
    if kind == FORWARD:
        if stage > 0:
            return (FORWARD, mb, chunk), stage - 1
        return ((FORWARD, mb, chunk - 1), p - 1) if chunk > 0 else None
    if stage == p - 1 and chunk == v - 1:  # the loss: backward starts from this forward
        return (FORWARD, mb, chunk), stage
    if stage < p - 1:
        return (BACKWARD, mb, chunk), stage + 1
    return (BACKWARD, mb, chunk + 1), 0


@dataclass(frozen=True)
class PipelineSchedule:
    """A simulated schedule as a ``(time, stage)`` grid of unit time slots.

    ``kind[t, s]`` is the op code stage ``s`` runs during slot ``t`` (see ``SLOT_LEGEND``:
    0 idle, 1 F, 2 B, 3 W); ``microbatch`` and ``chunk`` give its micro-batch and model chunk
    (-1 where idle). For schedules that do not split the backward, a B op covers
    ``t_b + t_w`` slots.
    """

    schedule: str
    stages: int
    microbatches: int
    virtual_stages: int
    kind: np.ndarray
    microbatch: np.ndarray
    chunk: np.ndarray

    @property
    def makespan(self) -> int:
        """Slots from the first op's start to the last op's end."""
        return self.kind.shape[0]

    def idle_slots(self) -> np.ndarray:
        """Idle slots per stage, int64 array of shape ``(stages,)``."""
        return (self.kind == IDLE).sum(axis=0)

    def bubble_fraction(self, relative_to: Literal["ideal", "total"] = "ideal") -> float:
        """Measured bubble: idle slots / busy slots ("ideal") or / all slots ("total"), summed over stages."""
        _check_choice("relative_to", relative_to, RELATIVE_TO)
        idle = int(self.idle_slots().sum())
        return idle / (self.kind.size - idle) if relative_to == "ideal" else idle / self.kind.size

    def peak_in_flight(self) -> np.ndarray:
        """Measured peak of held micro-batches (or chunks) per stage; see :func:`peak_in_flight`."""
        last_backward = WEIGHT if self.schedule == "zb-h1" else BACKWARD
        peaks = np.zeros(self.stages, dtype=np.int64)
        for s in range(self.stages):
            held, peak, previous = set(), 0, None
            for t in range(self.makespan):
                slot = (self.kind[t, s], self.microbatch[t, s], self.chunk[t, s])
                if slot != previous and slot[0] == FORWARD:
                    held.add(slot[1:])
                    peak = max(peak, len(held))
                ends = t + 1 == self.makespan or (self.kind[t + 1, s], self.microbatch[t + 1, s],
                                                   self.chunk[t + 1, s]) != slot
                if ends and slot[0] == last_backward:
                    held.discard(slot[1:])
                previous = slot
            peaks[s] = peak
        return peaks

    def to_text(self, width: int | None = None) -> str:
        """One line per stage; each slot is its op letter followed by the micro-batch number mod 10.

        With ``width`` (columns), the slots come in blocks that fit it, each under a header row that
        numbers every fifth slot; without it, one block and no header."""
        cells = [[SLOT_LEGEND[int(k)] + (str(int(mb) % 10) if k != IDLE else ".")
                  for k, mb in zip(self.kind[:, s], self.microbatch[:, s])] for s in range(self.stages)]
        label = len(f"stage {self.stages - 1}: ")
        slots = len(cells[0]) if cells else 0
        per_block = max(5, (width - label + 1) // 3 // 5 * 5) if width else max(slots, 1)
        blocks = []
        for start in range(0, max(slots, 1), per_block):
            lines = []
            if width:
                marks = "".join(f"{t:<15}" for t in range(start, min(start + per_block, slots), 5))
                lines.append(("slot:".ljust(label) + marks).rstrip())
            lines += [f"stage {s}: ".ljust(label) + " ".join(row[start:start + per_block]) for s, row in enumerate(cells)]
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)


MAX_GRID_OPS = 2_000_000  # ops simulated one by one in Python: a few seconds
MAX_GRID_CELLS = 20_000_000  # slots x stages held in three arrays (17 B per cell): about 340 MB


def _check_grid_size(p: int, m: int, v: int, t_op: int) -> None:
    """Refuse, before simulating, a grid too big to build: every op a stage runs is at most ``t_op``
    slots long and no stage waits longer than the ``p - 1`` ops ahead of it, so the makespan is below
    ``(m v + p - 1) t_op``."""
    ops = 3 * p * m * v
    cells = (m * v + p - 1) * t_op * p
    if ops > MAX_GRID_OPS or cells > MAX_GRID_CELLS:
        raise ValueError(f"stages={p}, microbatches={m}, virtual_stages={v} and op times t_f + t_b + t_w = {t_op} "
                         f"slots: the simulated grid would hold up to {ops:,} ops and {cells:,} slot cells (limits "
                         f"{MAX_GRID_OPS:,} and {MAX_GRID_CELLS:,}); use bubble_fraction() (closed form) for "
                         "schedules this large")


def pipeline_schedule(stages: int, microbatches: int, schedule: str = "1f1b", virtual_stages: int = 1,
                      t_f: int = 1, t_b: int = 1, t_w: int = 1) -> PipelineSchedule:
    """Simulate one optimizer step of a pipeline schedule and return its slot grid.

    Each stage runs its ops in the order the schedule prescribes (GPipe: all F then all B;
    1F1B: P-1-i warm-up forwards then F/B pairs, Narayanan et al. 2021; interleaved: the
    Megatron-LM warm-up/steady/cool-down order over v model chunks; ZB-H1: rounds of F, B,
    W, Qi et al. 2023). An op starts once its stage is free and its input exists: F of a
    micro-batch after the previous (virtual) stage's F of it, B after the next stage's B (or
    after the last stage's own F), W after the same stage's B. The timing is therefore
    derived from dependencies, not drawn from the closed form, and the idle-slot count can be
    checked against :func:`bubble_fraction`.

    ``t_f``, ``t_b``, ``t_w`` are positive ints (slots). With ``virtual_stages = v > 1`` they
    are the times of one *chunk* op (a stage's forward is then ``v * t_f``). Returns a
    :class:`PipelineSchedule`; errors as :func:`bubble_time` (no zb-h1 range limits here).
    """
    p, m, schedule, v = check_pipeline_setup(stages, microbatches, schedule, virtual_stages)
    t_f, t_b, t_w = (check_number(n, t, 1, integer=True) for n, t in (("t_f", t_f), ("t_b", t_b), ("t_w", t_w)))
    _check_grid_size(p, m, v, t_f + t_b + t_w)
    duration = {FORWARD: t_f, BACKWARD: t_b if schedule == "zb-h1" else t_b + t_w, WEIGHT: t_w}
    orders = stage_op_orders(p, m, schedule, v)
    finish: dict[tuple[tuple[int, int, int], int], int] = {}
    runs: list[tuple[int, int, int, tuple[int, int, int]]] = []  # (stage, start, end, op)
    cursor, free = [0] * p, [0] * p
    remaining = sum(map(len, orders))
    while remaining:
        progressed = False
        for s in range(p):
            while cursor[s] < len(orders[s]):
                op = orders[s][cursor[s]]
                dep = op_dependency(op, s, p, v)
                if dep is not None and dep not in finish:
                    break
                start = max(free[s], finish[dep] if dep is not None else 0)
                free[s] = finish[(op, s)] = start + duration[op[0]]
                runs.append((s, start, free[s], op))
                cursor[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # an order that waits on itself is a bug in stage_op_orders
            raise RuntimeError(f"pipeline schedule {schedule!r} deadlocked (P={p}, M={m}, v={v})")
    makespan = max(free)
    kind = np.zeros((makespan, p), dtype=np.int8)
    microbatch = np.full((makespan, p), -1, dtype=np.int64)
    chunk = np.full((makespan, p), -1, dtype=np.int64)
    for s, start, end, (k, mb, c) in runs:
        kind[start:end, s], microbatch[start:end, s], chunk[start:end, s] = k, mb, c
    return PipelineSchedule(schedule, p, m, v, kind, microbatch, chunk)
