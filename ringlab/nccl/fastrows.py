"""Result rows of the common nccl-tests layout, a block of input bytes at a time, at numpy speed.

The reader (:mod:`ringlab.nccl.reader`) hands each block of a file here before reading any line.
Every line is reduced to its *shape*: its bytes with each digit written as ``9`` (one
``bytes.translate`` over the block). A long table has few shapes, since a column's layout changes
only with its number of digits, so whether a line is a result row of
:data:`~ringlab.nccl.table.MODERN_COLUMNS` that :func:`~ringlab.nccl.table.parse_row` accepts whole
is decided once per shape (:func:`shape_of`), not once per line. Within one shape every digit of
every line sits at the same byte offset, and nccl-tests right-aligns its columns, so most shapes of
a table end each number at the same byte (:class:`Layout`): the numbers of all its lines are read
together, those bytes gathered into an array of digits and summed times their place values.

The grammar is strict so that this reading equals ``parse_row``'s: integers of 1 to 15 digits,
decimals ``ddd.ddd`` of at most 15 digits, ``#wrong`` digits or ``N/A``, a type and a redop
``parse_row`` accepts, fields separated by spaces or tabs, behind launcher prefixes that
:func:`~ringlab.nccl.lines.clean` strips. Numbers of at most 15 digits are integers below 2**53,
exact in float64 however the products are summed; a decimal read as its digits over ``10**k`` is
the correctly rounded quotient of two exact doubles, the double ``float()`` returns for its text
(Clinger's fast path: W. D. Clinger, "How to read floating point numbers accurately", PLDI 1990).
Anything else (exponents, signs on values, NaN, longer numbers, other prefixes, non-ASCII bytes,
line breaks other than ``\\n`` and ``\\r\\n``) is read by the per-line reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import table
from .lines import clean

_NINES = bytes.maketrans(b"012345678", b"999999999")
_DEC = r"9+(?:\.9+)?"
_ROW = re.compile(r"(?P<size>9{1,15})[ \t]+(?P<count>9{1,15})[ \t]+(?P<type>\w+)[ \t]+(?P<redop>[a-z]+)[ \t]+"
                  r"(?P<root>-?9{1,15})"
                  + "".join(rf"[ \t]+(?P<time{h}>{_DEC})[ \t]+(?P<algbw{h}>{_DEC})[ \t]+(?P<busbw{h}>{_DEC})"
                            rf"[ \t]+(?P<wrong{h}>9{{1,15}}|N/A)" for h in (0, 1)), re.ASCII)
_MAX_DIGITS = 15  # below 2**53: exact in float64
# the numbers of a row of MODERN_COLUMNS, out of place (0) and in place (1)
NUMBERS = ("size", "count", "root", "time0", "algbw0", "busbw0", "wrong0", "time1", "algbw1", "busbw1", "wrong1")
_DIGIT = np.zeros(256, dtype=np.uint8)  # the value of each byte as a digit: 0 for non-digits
_DIGIT[48:58] = np.arange(10)
SHAPES_KEPT = 4096  # shapes remembered across blocks (a table has tens; a log has one per line)


@dataclass(frozen=True)
class Shape:
    """A shape of result row: the line with its digits written as 9 (``text``), the span (bytes from the line
    start) of what :func:`~ringlab.nccl.lines.clean` keeps of it (``text_span``), the span and the decimals
    of each of :data:`NUMBERS` (``spans``, ``decimals``), which ``#wrong`` is ``N/A`` (``na``), the root's
    sign, and the type and redop as printed. ``type_span`` is set when the type has digits, which the
    shape hides."""

    text: str
    text_span: tuple[int, int]
    spans: tuple[tuple[int, int], ...]
    decimals: tuple[int, ...]
    na: tuple[bool, bool]
    root_sign: float
    dtype: str
    redop: str
    type_span: tuple[int, int] | None

    def aligned(self) -> tuple:
        """Shapes with equal ``aligned()`` end each number at the same byte, with the same decimals: nccl-tests
        pads its columns to fixed widths, so most rows of a table share one."""
        return tuple(b for _, b in self.spans), self.decimals, self.root_sign, self.dtype, self.redop


def shape_of(shape: bytes) -> Shape | None:
    """The :class:`Shape` of a line whose digits are all ``9`` (``shape``), or None when such lines are not
    all result rows that :func:`~ringlab.nccl.table.parse_row` accepts whole with MODERN_COLUMNS."""
    try:
        text = shape.decode("ascii")
    except UnicodeDecodeError:
        return None
    parts = text.splitlines()  # one line as str.splitlines() sees it: no \r, \f, \x1c... inside
    if len(parts) != 1 or text not in (parts[0], parts[0] + "\r"):
        return None
    row = clean(text)
    m = _ROW.fullmatch(row)
    if m is None or m["redop"] not in table.REDOPS or any(m[name].count("9") > _MAX_DIGITS for name in NUMBERS):
        return None
    digital = "9" in m["type"]
    if not digital and not table.is_dtype(m["type"]):
        return None
    # clean() strips trailing space and leading prefixes, by patterns that see a digit as a digit: so it keeps
    # the same bytes of every line of this shape
    start = len(text.rstrip()) - len(row)
    spans = tuple((start + m.start(name), start + m.end(name)) for name in NUMBERS)
    decimals = tuple(len(m[name]) - m[name].index(".") - 1 if "." in m[name] else 0 for name in NUMBERS)
    a, b = m.span("type")
    return Shape(text, (start, start + len(row)), spans, decimals, (m["wrong0"] == "N/A", m["wrong1"] == "N/A"),
                 -1.0 if m["root"][0] == "-" else 1.0, m["type"], m["redop"],
                 (start + a, start + b) if digital else None)


@dataclass(frozen=True)
class Layout:
    """Where the numbers of the rows of one or more aligned shapes are read: per name of :data:`NUMBERS`, the
    bytes (offsets from the line start, int64) and the place value of each (float64; 0 at a decimal point;
    a byte that is no digit counts 0), and 10**decimals; the root's sign; ``width``, the bytes from the
    line start to the last one read."""

    reads: dict[str, tuple[np.ndarray, np.ndarray, float]]
    root_sign: float
    width: int


def _layout(shapes: list[Shape]) -> Layout:
    """The :class:`Layout` of aligned ``shapes``: each number read over the widest of their spans."""
    reads = {}
    for n, (name, (_, end), k) in enumerate(zip(NUMBERS, shapes[0].spans, shapes[0].decimals)):
        offsets = np.arange(min(s.spans[n][0] for s in shapes), end)
        point = end - k - 1 if k else end  # the decimal point; digits left of it skip it
        places = [0.0 if p == point else 10.0 ** (end - 1 - p - (0 < k and p < point)) for p in offsets.tolist()]
        reads[name] = (offsets, np.array(places), 10.0 ** k)
    return Layout(reads, shapes[0].root_sign, shapes[0].spans[-1][1])


def _layouts(shapes: list[Shape]) -> tuple[list[Layout], list[int]]:
    """Layouts for ``shapes`` and the layout of each: aligned shapes share one when the widest spans reach no
    digit of another number in any of them (then the bytes they add are spaces, letters or signs)."""
    aligned: dict[tuple, list[int]] = {}
    for k, shape in enumerate(shapes):
        aligned.setdefault(shape.aligned(), []).append(k)
    layouts, which = [], [0] * len(shapes)
    for members in aligned.values():
        lows = [min(shapes[k].spans[n][0] for k in members) for n in range(len(NUMBERS))]
        fits = [k for k in members if not any("9" in shapes[k].text[low:span[0]]
                                              for low, span in zip(lows, shapes[k].spans))]
        for group in [fits] + [[k] for k in members if k not in fits]:
            if group:
                for k in group:
                    which[k] = len(layouts)
                layouts.append(_layout([shapes[k] for k in group]))
    return layouts, which


class Block:
    """One block of input bytes split at ``\\n``: line ``i`` is ``data[starts[i]:ends[i]]``; ``kind[i]`` is
    0 for a line the per-line reader must read, else ``shapes[kind[i]]`` is the line's :class:`Shape`.

    ``cache`` maps shapes seen in earlier blocks to their :class:`Shape` (or None); it is emptied past
    :data:`SHAPES_KEPT` entries, so a log of all-different lines holds no more.
    """

    def __init__(self, data: bytes, cache: dict):
        self.data = data
        self.array = np.frombuffer(data, dtype=np.uint8)
        breaks = np.flatnonzero(self.array == 10)
        whole = len(breaks) and breaks[-1] == len(data) - 1  # the block ends with a line break
        self.starts = np.r_[0, breaks + 1][:len(breaks) + (0 if whole else 1)]
        self.ends = np.r_[breaks, len(data)][:len(self.starts)]
        lines = data.translate(_NINES).split(b"\n")
        if whole:
            lines.pop()
        if len(cache) > SHAPES_KEPT:
            cache.clear()
        self.shapes: list[Shape | None] = [None]
        ids = {}
        for line in set(lines):
            if line not in cache:
                cache[line] = shape_of(line)
            found = cache[line]
            ids[line] = 0 if found is None else len(self.shapes)
            if found is not None:
                self.shapes.append(found)
        self.kind = np.fromiter(map(ids.__getitem__, lines), dtype=np.int64, count=len(lines))
        for k in [k for k, s in enumerate(self.shapes) if s is not None and s.type_span is not None]:
            self._split_by_type(k)
        pairs: dict[tuple, int] = {}
        self.printed = np.array([-1] + [pairs.setdefault((s.dtype, s.redop), len(pairs)) for s in self.shapes[1:]],
                                dtype=np.float64)  # per kind: equal for equal type and redop
        self.layouts, which = _layouts(self.shapes[1:])  # a layout per set of aligned shapes
        self._columns: dict[str, np.ndarray] = {}
        self.layout_of = np.array([-1, *which], dtype=np.int16 if len(self.shapes) < 2**15 else np.int64)

    def _split_by_type(self, k: int) -> None:
        """Give the lines of shape ``k`` (a type with digits: int32, bfloat16...) one shape per type printed,
        and kind 0 to lines whose type ``parse_row`` would not accept."""
        shape = self.shapes[k]
        lines = np.flatnonzero(self.kind == k)
        a, b = shape.type_span
        cells = np.ascontiguousarray(self.array[self.starts[lines][:, None] + np.arange(a, b)])
        names, which = np.unique(cells.view(f"S{b - a}").ravel(), return_inverse=True)
        new = []
        for name in names.tolist():
            dtype = name.decode("ascii")
            if table.is_dtype(dtype):
                self.shapes.append(replace(shape, dtype=dtype, type_span=None))
                new.append(len(self.shapes) - 1)
            else:
                new.append(0)
        self.kind[lines] = np.array(new, dtype=np.int64)[which.ravel()]

    def __len__(self) -> int:
        return len(self.kind)

    def raw(self, i: int) -> str:
        """Line ``i`` of a row (ASCII) as ``str.splitlines`` gives it: without its line break."""
        return self.data[self.starts[i]:self.ends[i]].decode("ascii").removesuffix("\r")

    def chunk(self, i: int, j: int) -> bytes:
        """The bytes of lines ``i`` to ``j - 1``, line breaks included."""
        return self.data[self.starts[i]:self.starts[j] if j < len(self) else len(self.data)]

    def columns(self, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        """:meth:`numbers` ``names`` of every line of the block (float64 ``(len(self),)``; NaN on lines of kind 0),
        read once per block for all its rows."""
        missing = tuple(name for name in names if name not in self._columns)
        if missing:
            rows = np.flatnonzero(self.kind)
            for name, values in self.numbers(rows, missing).items():
                self._columns[name] = np.full(len(self), np.nan)
                self._columns[name][rows] = values
        return {name: self._columns[name] for name in names}

    def numbers(self, rows: np.ndarray, names: tuple[str, ...] = NUMBERS) -> dict[str, np.ndarray]:
        """The numbers ``names`` (of :data:`NUMBERS`) of lines ``rows`` (int64, all of kind > 0), as printed:
        float64 ``(len(rows),)``, exact for integers (a ``#wrong`` printed ``N/A`` reads 0: see
        :attr:`Shape.na`) and for decimals the double ``float()`` gives (module docstring)."""
        layout = self.layout_of[self.kind[rows]]
        out = {name: np.empty(len(rows)) for name in names}
        if len(rows) and (layout == layout[0]).all():
            groups = [(slice(None), layout[0])]  # one layout: no sorting, no scattering
        else:
            order = np.argsort(layout, kind="stable")  # a radix sort for int16
            groups = [(part, layout[part[0]]) for part in np.split(order, np.flatnonzero(np.diff(layout[order])) + 1)
                      if len(part)]
        for part, which in groups:
            at = self.layouts[which]
            reads = [at.reads[name] for name in names]
            # the lines as rows of `at.width` bytes (a view: a window at each byte of the block); the bytes read
            # as a row per offset, a column per line, in digit values; each number is then its digits times
            # their place values, summed a row at a time (small arrays stay in cache; no BLAS threads)
            windows = as_strided(self.array, shape=(len(self.array) - at.width + 1, at.width), strides=(1, 1))
            digits = np.take(_DIGIT, windows[self.starts[rows[part]]][:, np.concatenate([r[0] for r in reads])].T)
            row = 0
            for name, (offsets, places, scale) in zip(names, reads):
                total = np.multiply(digits[row], places[0], dtype=np.float64)
                for k in range(1, len(offsets)):
                    total += np.multiply(digits[row + k], places[k], dtype=np.float64)
                row += len(offsets)
                if scale != 1.0:
                    total /= scale  # one correctly rounded division: float() of the text
                elif name == "root":
                    total *= at.root_sign
                out[name][part] = total
        return out
