"""The design interview: "train this model on these GPUs in N days: choose a layout", and the interviewer's answer.

:func:`draw_prompt` picks a job from :data:`PROMPTS` (presets and cluster sizes; a seed picks one);
:func:`parse_layout` reads what the learner types (``dp=8 tp=8 pp=8 zero=1 recompute=selective``);
:func:`check_design` answers as an interviewer would: does it fit, its predicted MFU and days, how far it is
from the best layout :func:`~ringlab.plan.train.plan_train` finds, and which constraint costs it. Every
number is ``train_plan``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ringlab.plan.space import ZERO_STAGE, Candidate, TrainJob
from ringlab.plan.train import TrainSearch, binding_constraint, evaluate, peak_memory, plan_train

# model preset, GPUs, topology, sequence length, sequences per step, training tokens
PROMPTS = (
    ("llama-3-8b", 64, "dgx-h100", 8192, 512, 1_000_000_000_000),
    ("llama-3-70b", 512, "dgx-h100", 8192, 512, 2_000_000_000_000),
    ("llama-2-70b", 256, "dgx-a100", 4096, 1024, 1_000_000_000_000),
    ("mixtral-8x7b", 128, "dgx-h100", 4096, 1024, 1_000_000_000_000),
)
KEYS = {"dp": "dp", "tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "vp": "virtual_stages", "zero": "zero",
        "recompute": "recompute", "mb": "micro_batch"}
STRONG, REASONABLE = 1.05, 1.25  # step time over the best's: within 5% is a strong answer, within 25% a fair one


@dataclass(frozen=True)
class DesignPrompt:
    """A job and its deadline: ``days`` is 1.25 x what the best layout needs, rounded up to a whole day."""

    job: TrainJob
    tokens: int
    days: int
    search: TrainSearch

    @property
    def steps(self) -> int:
        return math.ceil(self.tokens / (self.job.seq_len * self.job.global_batch))

    def text(self) -> str:
        j = self.job
        params = j.model.param_count() / 1e9
        return (f"Train {j.model.name} ({params:.0f}B parameters) on {j.gpus:,} {j.hardware.name} GPUs ({j.topology}, "
                f"{j.gpus_per_node} per NVLink domain, {j.hardware.memory / 1e9:.0f} GB each) on {self.tokens / 1e12:g}T "
                f"tokens in {self.days} days: sequences of {j.seq_len:,} tokens, {j.global_batch:,} sequences per "
                f"step. Choose a layout, e.g. dp=8 tp=8 pp=8 zero=1 recompute=selective "
                f"(also cp=, ep=, vp=, mb=; dp may be left out).")

    def days_of(self, step_seconds: float) -> float:
        return self.steps * step_seconds / 86400


def draw_prompt(seed: int = 0) -> DesignPrompt:
    """The prompt ``seed`` picks (``seed % len(PROMPTS)``), with its best layout found by ``plan_train``."""
    model, gpus, topology, seq, batch, tokens = PROMPTS[seed % len(PROMPTS)]
    job = TrainJob(model, gpus, topology, seq, batch)
    search = plan_train(job, top=1)
    steps = math.ceil(tokens / (seq * batch))
    days = math.ceil(steps * search.best.step_seconds / 86400 * REASONABLE)
    return DesignPrompt(job, tokens, days, search)


def parse_layout(text: str, gpus: int) -> dict:
    """The layout typed as ``key=value`` pairs (keys of :data:`KEYS`); ``dp`` defaults to the GPUs left over.

    ``zero``: 0-3 or ddp / zero1 / zero2 / zero3; ``recompute``: none, selective or full; degrees are ints >= 1.
    Raises ValueError with one line naming the key and the accepted values.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("type a layout such as: dp=8 tp=8 pp=8 zero=1 recompute=selective")
    out: dict = {"cp": 1, "ep": 1, "virtual_stages": 1, "zero": "zero1", "recompute": "none", "micro_batch": 1}
    seen = set()
    for token in text.replace(",", " ").split():
        key, sep, value = token.partition("=")
        key = key.strip().lower()
        if not sep or key not in KEYS:
            raise ValueError(f"{token!r}: write key=value with a key among {', '.join(KEYS)}")
        if key in seen:
            raise ValueError(f"{key} is given twice")
        seen.add(key)
        value = value.strip().lower()
        if key == "zero":
            names = {"0": "ddp", "1": "zero1", "2": "zero2", "3": "zero3", "ddp": "ddp", "zero1": "zero1",
                     "zero2": "zero2", "zero3": "zero3", "fsdp": "zero3"}
            if value not in names:
                raise ValueError(f"zero={value!r}: use 0, 1, 2 or 3 (ddp, zero1, zero2, zero3 / fsdp)")
            out["zero"] = names[value]
        elif key == "recompute":
            if value not in ("none", "selective", "full"):
                raise ValueError(f"recompute={value!r}: use none, selective or full")
            out["recompute"] = value
        else:
            if not value.isdigit() or int(value) < 1 or int(value) > 1 << 22:
                raise ValueError(f"{key}={value!r}: a whole number from 1 to {1 << 22:,}")
            out[KEYS[key]] = int(value)
    for key in ("tp", "pp"):
        out.setdefault(key, 1)
    others = out["tp"] * out["pp"] * out["cp"]
    if "dp" not in out:
        if gpus % others:
            raise ValueError(f"tp x pp x cp = {others} does not divide the {gpus:,} GPUs")
        out["dp"] = gpus // others
    if out["dp"] * others != gpus:
        raise ValueError(f"dp x tp x pp x cp = {out['dp'] * others:,}, but the job has {gpus:,} GPUs")
    return out


@dataclass(frozen=True)
class DesignFeedback:
    """The interviewer's answer: ``fits``, ``mfu``, ``days``, ``ratio`` (step time over the best's), ``binding``
    (key and words), ``verdict`` (strong / fair / weak / does not fit) and ``lines`` to print."""

    fits: bool
    mfu: float | None
    days: float | None
    ratio: float | None
    binding: str
    verdict: str
    lines: tuple[str, ...]


def check_design(prompt: DesignPrompt, text: str) -> DesignFeedback:
    """Parse ``text`` and answer it (module docstring). Raises ValueError (one line) for a layout that cannot
    be read or that ``check_layout`` refuses (it names the rule)."""
    job = prompt.job
    layout = parse_layout(text, job.gpus)
    c = Candidate(layout["dp"], layout["tp"], layout["pp"], layout["cp"], layout["ep"], layout["virtual_stages"],
                  layout["tp"] > 1 and (job.seq_len // layout["cp"]) % layout["tp"] == 0, layout["zero"],
                  layout["recompute"], layout["micro_batch"])
    plan = evaluate(job, c)
    best = prompt.search.best
    used, usable = peak_memory(plan), job.usable_memory
    shown = (f"dp={c.dp} tp={c.tp} pp={c.pp} cp={c.cp} ep={c.ep} vp={c.virtual_stages} zero={ZERO_STAGE[c.zero]} "
             f"recompute={c.recompute} mb={c.micro_batch}")
    lines = [f"Your layout: {shown}."]
    best_days = prompt.days_of(best.step_seconds)
    best_line = (f"The best layout found: {best.candidate.describe()}: {best.step_seconds:.2f} s per step, "
                 f"{best.mfu:.0%} MFU, {best_days:.1f} days.")
    if used > usable:
        lines += [f"It does not fit: {used / 1e9:.1f} GB per GPU on its busiest stage, above the "
                  f"{usable / 1e9:.1f} GB usable ({job.hardware.memory / 1e9:.0f} GB less a {job.margin:.0%} margin). "
                  "An interviewer stops here: more pipeline stages, ZeRO-3, recompute or a smaller micro-batch would "
                  "bring it down.", best_line]
        return DesignFeedback(False, None, None, None, "memory", "does not fit", tuple(lines))
    st = plan.time
    days = prompt.days_of(st.step_time)
    ratio = st.step_time / best.step_seconds
    key, words = binding_constraint(job, c, plan)
    verdict = "strong" if ratio <= STRONG else "fair" if ratio <= REASONABLE else "weak"
    deadline = "meets" if days <= prompt.days else "misses"
    lines += [f"It fits: {used / 1e9:.1f} of {usable / 1e9:.1f} GB usable per GPU.",
              f"Predicted: {st.step_time:.2f} s per step, MFU {st.mfu:.1%}, {days:.1f} days for {prompt.steps:,} "
              f"steps: it {deadline} the {prompt.days}-day deadline.",
              f"Against the best: {ratio:.2f}x its step time ({verdict}). What costs you most: {words}.",
              best_line]
    return DesignFeedback(True, st.mfu, days, ratio, key, verdict, tuple(lines))
