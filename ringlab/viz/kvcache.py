"""Figures and an explorer for KV-cache memory against context length, with the weights crossover.

Every byte count comes from :func:`ringlab.calc.kv_cache_bytes` (MHA, GQA, MQA, MLA, sliding and
chunked windows, hybrids, tensor parallel, per GPU; summed over ``ModelConfig.layers``) and
``ModelConfig.weight_bytes``. Byte axes are decimal GB (1e9 B) on the
left and binary GiB (2**30 B) on the right.
"""

from __future__ import annotations

import html

import numpy as np

from ringlab.calc import (
    GB, HARDWARE, MODELS, dtype_bytes, format_bytes, get_model, kv_cache_bytes, kv_cache_bytes_per_token,
)
from ringlab.calc.kvcache import attention_heads_per_rank, kv_cache_by_layer_kind

from ._controls import dropdown, int_slider, selection_slider
from ._controls import image as explorer_image
from ._mpl import Canvas, pyplot, show, widgets
from ._redraw import clear_plotted
from .comm import gib_axis

MODELS_SHOWN = ("llama-2-7b", "llama-2-70b", "llama-3-8b", "falcon-7b", "mistral-7b", "deepseek-v3")
CONTEXTS = tuple(2**k for k in range(8, 21))  # 256 .. 1,048,576 tokens
REFERENCE_GPUS = ("h100-sxm", "h200")  # HBM lines in the explorer
KV_DTYPES = ("fp16", "bf16", "fp8", "int8", "fp32")


def attention_kind(model) -> str:
    """Short description of what the cache stores: "MHA 32/32", "GQA 8/64", "MQA", "MLA", then what
    differs between layers: "21/42 layers window 4096", "10/118 layers attend" (hybrids)."""
    m = get_model(model)
    if m.uses_mla:
        kind = f"MLA latent {m.kv_lora_rank}+{m.qk_rope_head_dim}"
    elif m.num_key_value_heads == 1:
        kind = f"MQA 1/{m.num_attention_heads}"
    elif m.num_key_value_heads == m.num_attention_heads:
        kind = f"MHA {m.num_attention_heads}/{m.num_attention_heads}"
    else:
        kind = f"GQA {m.num_key_value_heads}/{m.num_attention_heads}"
    n = m.num_hidden_layers
    attending = sum(layer.caches_kv for layer in m.layers)
    if attending < n:
        kind += f", {attending}/{n} layers attend"
    for mixer, word in (("sliding", "window"), ("chunked", "chunk")):
        windowed = [layer.window for layer in m.layers if layer.mixer == mixer]
        if windowed:
            share = "" if len(windowed) == attending else f"{len(windowed)}/{n} layers "
            kind += f", {share}{word} {windowed[0]}"
    return kind


def crossover_tokens(model, batch_size: int = 1, dtype: str = "fp16", weight_dtype: str = "bf16", tp: int = 1,
                     max_tokens: int = 2**27) -> int | None:
    """Smallest context (tokens per sequence) at which the KV cache on one GPU is at least as large as
    that GPU's share of the weights (``weight_bytes(weight_dtype) / tp``), or None if it never gets
    there up to ``max_tokens`` (a sliding window caps the cache). Binary search: the cache never
    shrinks as the context grows. Raises ValueError like :func:`ringlab.calc.kv_cache_bytes`.
    """
    m = get_model(model)
    weights = m.weight_bytes(weight_dtype) / tp

    def reached(tokens: int) -> bool:
        return kv_cache_bytes(m, tokens, batch_size, dtype, tp) >= weights

    if not reached(max_tokens):
        return None
    lo, hi = 1, max_tokens  # invariant: reached(hi); not reached(lo - 1)
    while lo < hi:
        mid = (lo + hi) // 2
        if reached(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def tp_choices(model, candidates=(1, 2, 4, 8, 16)) -> tuple[int, ...]:
    """The ``candidates`` TP degrees :func:`ringlab.calc.kvcache.attention_heads_per_rank` accepts: they
    divide the query heads and divide, or are multiples of, the KV heads of every attention layer (no
    KV-head condition for MLA, whose latent is not split)."""
    m = get_model(model)

    def fits(tp: int) -> bool:
        try:
            attention_heads_per_rank(m, tp)
        except ValueError:
            return False
        return True

    return tuple(tp for tp in candidates if fits(tp))


def _tokens_text(tokens: int) -> str:
    return f"{tokens / 1e6:.3g}M" if tokens >= 10**6 else f"{tokens / 1e3:.3g}k" if tokens >= 1000 else str(tokens)


def plot_kv_vs_context(models=MODELS_SHOWN, batch_size: int = 1, dtype: str = "fp16", weight_dtype: str = "bf16",
                       tp: int = 1, contexts=CONTEXTS, mark: int | None = None, ax=None):
    """Log-log: KV-cache bytes on one GPU against context (tokens per sequence), one line per model.

    Each model's weights on that GPU (``weight_dtype``, divided by ``tp``) are a thin dotted line of the
    same colour; a large dot marks where the cache overtakes them (:func:`crossover_tokens`), and the
    legend gives that context ("never" when a sliding window caps the cache below the weights). ``mark`` draws a
    vertical line at one context. Returns the figure. Raises ValueError for unknown names or a ``tp``
    that does not fit a model's KV heads.
    """
    plt = pyplot()
    ctx = np.asarray(contexts)
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7.5, 5.4))
    else:
        fig = ax.figure
    for i, name in enumerate(models):
        m = get_model(name)
        color = f"C{i}"
        kv = np.array([kv_cache_bytes(m, int(t), batch_size, dtype, tp) for t in ctx]) / GB
        weights = m.weight_bytes(weight_dtype) / tp / GB
        cross = crossover_tokens(m, batch_size, dtype, weight_dtype, tp)
        when = f"{_tokens_text(cross)} tokens" if cross else "never"
        ax.plot(ctx, kv, color=color, lw=1.8, label=f"{m.name} ({attention_kind(m)}): {when}")
        ax.axhline(weights, color=color, lw=0.8, ls=":")
        if cross is not None and ctx[0] <= cross <= ctx[-1]:
            ax.plot([cross], [kv_cache_bytes(m, cross, batch_size, dtype, tp) / GB], "o", color=color, ms=8,
                    mec="black")
    if mark is not None:
        ax.axvline(mark, color="0.3", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context per sequence (tokens)")
    ax.set_ylabel("KV cache per GPU, GB (1e9 B)")
    gib_axis(ax, log=True)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)  # below: lines fill the axes
    ax.set_title(f"KV cache ({dtype}), batch {batch_size}, TP {tp}; dotted: weights ({weight_dtype}) per GPU\n"
                 "dot and legend: context at which the cache equals the weights", fontsize=9)
    if own:
        fig.tight_layout()
    return fig


def plot_gpu_budget(model="llama-2-70b", tokens: int = 4096, batch_size: int = 32, dtype: str = "fp16",
                    tp: int = 1, weight_dtype: str = "bf16", gpus=REFERENCE_GPUS, ax=None):
    """One stacked bar: weights and KV cache on one GPU of a ``tp``-way group, against the HBM of
    ``gpus`` (datasheet memory, decimal GB, from ``ringlab.calc.HARDWARE``). Returns the figure."""
    plt = pyplot()
    m = get_model(model)
    weights = m.weight_bytes(weight_dtype) / tp / GB
    kv = kv_cache_bytes(m, tokens, batch_size, dtype, tp) / GB
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(3.2, 4.2))
    else:
        fig = ax.figure
    ax.bar([0], [weights], color="#6e7781", label=f"weights ({weight_dtype})", width=0.6)
    ax.bar([0], [kv], bottom=[weights], color="#cf222e", label=f"KV cache ({dtype})", width=0.6)
    for name in gpus:
        hw = HARDWARE[name]
        ax.axhline(hw.memory / GB, color="0.2", ls="--", lw=1)
        ax.text(0.33, hw.memory / GB, f"{name} {hw.memory / GB:.0f} GB", fontsize=7, va="bottom", ha="right",
                bbox={"facecolor": "white", "alpha": 0.7, "lw": 0})
    ax.set_xticks([])
    ax.set_xlim(-0.5, 0.5)
    ax.set_ylabel("bytes on one GPU, GB (1e9 B)")
    ax.set_ylim(0, max(weights + kv, *(HARDWARE[g].memory / GB for g in gpus)) * 1.4)  # room for the legend
    gib_axis(ax)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(f"one GPU: {weights + kv:,.1f} GB", fontsize=9)
    if own:
        fig.tight_layout()
    return fig


def _heads_mistake(m, tokens: int, batch_size: int, dtype: str, tp: int, total: int) -> str:
    """Caption line: the cache computed with num_attention_heads as if they were the KV heads."""
    if m.num_attention_heads == m.num_key_value_heads:
        return ""
    try:
        wrong = kv_cache_bytes(m.replace(num_key_value_heads=m.num_attention_heads), tokens, batch_size, dtype, tp)
    except ValueError:  # tp does not divide num_attention_heads (Falcon-7B's 71)
        return ""
    return (f"<br>with num_attention_heads ({m.num_attention_heads}) in place of num_key_value_heads "
            f"({m.num_key_value_heads}) you would get {wrong / total:g}x this: {html.escape(format_bytes(wrong))}")


def _formula(m, dtype: str, tp: int) -> str:
    """The per-token sum with this model's numbers, one term per kind of KV layer."""
    width = dtype_bytes(dtype)
    rows = [row for row in kv_cache_by_layer_kind(m, 1, dtype, tp) if row["bytes_per_token"]]
    if len(rows) == 1 and rows[0]["mixer"] != "mla" and rows[0]["k_head_dim"] == rows[0]["v_head_dim"]:
        r = rows[0]
        return f"2 (K, V) x {r['layers']} layers x {r['kv_heads']} KV heads x {r['k_head_dim']} x {width} B"
    terms = []
    for r in rows:
        layers = f"{r['layers']} {r['mixer']} layers" if len(rows) > 1 else f"{r['layers']} layers"
        if r["mixer"] == "mla":
            terms.append(f"{layers} x ({m.kv_lora_rank} + {m.qk_rope_head_dim}) x {width} B")
        else:
            terms.append(f"{layers} x {r['kv_heads']} KV heads x ({r['k_head_dim']} + {r['v_head_dim']}) x {width} B")
    return " + ".join(terms)


def describe_kv(model, dtype: str = "fp16", tokens: int = 4096, batch_size: int = 1, tp: int = 1) -> str:
    """HTML caption: the formula with this model's numbers (a term per kind of layer), the total (GB
    and GiB), what windows hold, the num_attention_heads mistake, and the context where the cache
    overtakes the weights."""
    m = get_model(model)
    per_token = kv_cache_bytes_per_token(m, dtype, tp)
    total = kv_cache_bytes(m, tokens, batch_size, dtype, tp)
    wrong = "" if m.uses_mla else _heads_mistake(m, tokens, batch_size, dtype, tp, total)
    windows = "".join(
        f"<br>{row['layers']} {row['mixer']} layers hold min(tokens, {row['window']}) = {row['held_tokens']:,} tokens"
        for row in kv_cache_by_layer_kind(m, tokens, dtype, tp) if row["window"])
    cross = crossover_tokens(m, batch_size, dtype, "bf16", tp)
    where = (f"at {_tokens_text(cross)} tokens per sequence" if cross is not None
             else "never: the windows cap the cache")
    return (f"<b>{html.escape(m.name)}</b> ({html.escape(attention_kind(m))}), TP {tp}: "
            f"{_formula(m, dtype, tp)} = <b>{per_token:,} B per token</b> per GPU<br>"
            f"x {tokens:,} tokens x batch {batch_size} = <b>{html.escape(format_bytes(total))}</b>{windows}{wrong}"
            f"<br>KV cache = bf16 weights per GPU (batch {batch_size}): {where}")


def draw_kv(model="llama-2-70b", dtype: str = "fp16", tokens: int = 4096, batch_size: int = 32, tp: int = 1):
    """Two panels: this model's KV cache against context with the weights crossover (``tokens`` marked),
    and the one-GPU budget bar. Returns the figure."""
    fig, (left, right) = _kv_axes(pyplot().figure(figsize=(10.8, 4.2)))
    _draw_kv_on(left, right, model, dtype, tokens, batch_size, tp)
    return fig


def _kv_axes(fig):
    """The two panels of :func:`draw_kv` at fixed margins (an explorer redraws them without a layout pass)."""
    grid = fig.add_gridspec(1, 2, width_ratios=[3, 1], left=0.075, right=0.94, bottom=0.12, top=0.87, wspace=0.38)
    return fig, (fig.add_subplot(grid[0]), fig.add_subplot(grid[1]))


def _draw_kv_on(left, right, model, dtype: str, tokens: int, batch_size: int, tp: int) -> None:
    plot_kv_vs_context([model], batch_size, dtype, tp=tp, mark=tokens, ax=left)
    left.legend(fontsize=7, loc="lower right")  # one rising line leaves the lower right empty
    plot_gpu_budget(model, tokens, batch_size, dtype, tp, ax=right)


def kv_explorer(model: str = "llama-2-70b", dtype: str = "fp16", tokens: int = 4096, batch_size: int = 32,
                tp: int = 1):
    """Widget: model, cache dtype, context, batch and TP degree over :func:`draw_kv` and :func:`describe_kv`.

    Returns an ``ipywidgets.VBox`` of the controls, an HTML caption and an ``Image``. The callback only
    sets widget values (no printing, for nbval). The TP choices follow the model (:func:`tp_choices`), so
    every combination the controls offer is valid.
    """
    w = widgets()
    model_dd = dropdown("model", list(MODELS), model)
    dtype_dd = dropdown("dtype", KV_DTYPES, dtype)
    ctx_slider = selection_slider("context", CONTEXTS, tokens, "tokens")
    batch_slider = int_slider("batch", batch_size, 1, 256, name="batch_size")
    tp_dd = dropdown("TP", tp_choices(model), tp, "tp")
    caption = w.HTML()
    image = explorer_image()
    controls = (model_dd, dtype_dd, ctx_slider, batch_slider, tp_dd)

    updating = []  # non-empty while the TP choices are being replaced

    canvas = Canvas(10.8, 4.2)  # one figure, redrawn in place (see ._redraw)
    _, (left, right) = _kv_axes(canvas.fig)

    def render(*_):
        if updating:
            return
        args = (model_dd.value, dtype_dd.value, ctx_slider.value, batch_slider.value, tp_dd.value)
        clear_plotted(left, right)
        _draw_kv_on(left, right, *args)
        show(image, caption, canvas, describe_kv(*args))

    def new_model(change):
        choices = tp_choices(change["new"])
        keep = max(t for t in choices if t <= tp_dd.value)
        updating.append(True)
        tp_dd.options, tp_dd.value = choices, keep
        updating.clear()
        render()

    model_dd.observe(new_model, names="value")
    for control in controls[1:]:
        control.observe(render, names="value")
    render()
    return w.VBox([w.HBox([model_dd, dtype_dd, tp_dd]), ctx_slider, batch_slider, caption, image])
