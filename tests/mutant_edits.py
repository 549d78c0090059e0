"""Known-wrong answers written as small edits of a solution.

A mistake that changes a line or two of a long answer (the ex15 kernel) is kept here as the
edit itself, applied to the current solution, rather than as another full copy of the answer.
Mistakes that reshape an answer stay whole files in ``tests/mutants/``.

Each entry: name -> (solution file, edits, EXPECT, why). An edit is ``(text, replacement, count)``:
``text`` must occur exactly ``count`` times in the solution, so editing the solution cannot
silently turn a mutant back into a right answer. EXPECT lists the words the grader's first
failure message must contain.
"""

from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"

_KERNEL = "ex15_layernorm_kernel.py"
_RSTD = "rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)"
_CENTRED = "centred = tl.where(mask, x - mean, 0.0)"

EDITS = {
    "ex15_forgets_eps": (_KERNEL, [(_RSTD, "rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols)", 1)],
                         ["rstd is", "eps is missing"],
                         "rstd = 1 / sqrt(var): too large by about 1 + eps / (2 var), infinite on a constant row"),
    "ex15_unbiased_variance": (_KERNEL, [(_RSTD, "rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / (n_cols - 1) + eps)", 1)],
                               ["rstd is", "unbiased variance", "n_cols=7"],
                               "divides by D - 1; layer_norm uses the biased variance (and D = 1 gives 0/0)"),
    "ex15_padding_in_variance": (_KERNEL, [(_CENTRED, "centred = x - mean", 1)],
                                 ["rstd is", "padded lanes", "n_cols=7"],
                                 "each padded lane adds (0 - mean)**2 to the sum of squares"),
    "ex15_unmasked_store": (_KERNEL, [("tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)",
                                       "tl.store(y_row + cols, y.to(Y.dtype.element_ty))", 1)],
                            ["wrote column 7", "past the row", "mask it"],
                            "right values, but the padded lanes are stored too: into the next row on a GPU"),
    "ex15_fp16_accumulation": (_KERNEL, [
        ("acc = tl.full([BLOCK_D], 0.0, tl.float32)", "acc = tl.full([BLOCK_D], 0.0, X.dtype.element_ty)", 2),
        ("acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)",
         "acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0)", 1),
        (_CENTRED, "centred = tl.where(mask, x - mean, 0.0).to(X.dtype.element_ty)", 1),
    ], ["dtype=float16", "mean is", "fp16 rounding"],
        "sums and squares in the input dtype: fp16 running sums keep 11 significant bits"),
}


def mutated_source(name: str) -> str:
    """The solution's text with the edits of mutant ``name`` applied; ValueError if an edit no longer fits."""
    solution, edits, _, _ = EDITS[name]
    text = (SOLUTIONS / solution).read_text()
    for old, new, count in edits:
        found = text.count(old)
        if found != count:
            raise ValueError(f"{name}: expected {count} x {old!r} in solutions/{solution}, found {found}")
        text = text.replace(old, new)
    return text
