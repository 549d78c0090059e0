"""argparse ``type=`` factories on the grammar of :mod:`ringlab.calc.parsing`, shared by every command.

    p.add_argument("--size", type=cli_args.size())                 # "64MiB", "16Mb" -> int bytes
    p.add_argument("--bandwidth", type=cli_args.bandwidth())       # "400 Gb/s" -> 5e10 B/s
    p.add_argument("--interval", type=cli_args.duration(max=86400))
    p.add_argument("--world-size", type=cli_args.integer(min=1, max=4096))
    p.add_argument("--algorithm", type=cli_args.text())            # refuses "" and control characters

Commands build their parser with :class:`ArgumentParser`, so a bad value exits with status 2 and
one line, ``prog: error: argument --size: '2,5GB': ... (--help lists the options)``: argparse names
the option, the message names the value and the accepted forms. A command with subcommands
(``ringlab calc kv``) hands its table of them to :func:`dispatch`.
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib
import json
import math
import os
import re
import shutil
import sys

from ringlab import textfmt
from ringlab.calc import parsing
from ringlab.textfmt import WIDTH

TEXT_MAX = 4096  # characters: PATH_MAX on Linux, and more than any preset name


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` at most :data:`ringlab.textfmt.WIDTH` columns wide (narrower on a narrow terminal); an option
    with many choices shows a metavar and lists its choices in its help, which wraps, instead of ``{a,b,...}``."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        width = min(width or shutil.get_terminal_size().columns - 2, WIDTH)
        super().__init__(prog, indent_increment, max_help_position, width)

    @staticmethod
    def _many_choices(action) -> bool:
        return action.metavar is None and action.choices is not None and len(",".join(map(str, action.choices))) > 30

    def _metavar_formatter(self, action, default_metavar):
        if self._many_choices(action):
            return lambda tuple_size: (action.dest.upper(),) * tuple_size
        return super()._metavar_formatter(action, default_metavar)

    def _format_action(self, action):
        if self._many_choices(action) and not action.help:  # argparse prints no help line without a help text
            action = copy.copy(action)
            action.help = "default %(default)s" if action.default is not None else ""
        return super()._format_action(action)

    def _get_help_string(self, action):
        text = action.help or ""
        if self._many_choices(action):
            text += f"{' ' if text else ''}(one of: {', '.join(map(str, action.choices))})"
        return text


class RawDescriptionHelpFormatter(HelpFormatter):
    """:class:`HelpFormatter` that keeps the description's and epilog's line breaks; a line too wide is
    wrapped under its second column (``  ringlab x    what it does`` continues under ``what``)."""

    def _fill_text(self, text, width, indent):
        out = []
        for line in text.splitlines():
            if len(indent + line) <= self._width:
                out.append(indent + line)
                continue
            lead = re.match(r"(\s*(?:\S+(?: \S+)*\s{2,})?)", line).group(1)  # up to a 2-space column gap
            out.append(textfmt.wrap(line.strip(), indent + line[:len(line) - len(line.lstrip())],
                                    " " * (len(lead) - (len(line) - len(line.lstrip()))) or "    ", self._width))
        return "\n".join(out)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with one-line errors (no usage block): ``prog: error: message``, exit status 2,
    and help that fits :data:`ringlab.textfmt.WIDTH` columns (:class:`HelpFormatter`)."""

    def __init__(self, *args, **kwargs):
        formatter = kwargs.get("formatter_class", argparse.HelpFormatter)
        kwargs["formatter_class"] = (RawDescriptionHelpFormatter if issubclass(formatter, argparse.RawDescriptionHelpFormatter)
                                     else formatter if issubclass(formatter, HelpFormatter) else HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} ('{self.prog} --help' lists the options)\n")


def _wrap(parse, label: str, **limits):
    @functools.wraps(parse)
    def convert(text: str):
        try:
            return parse(text, None, **limits)
        except (ValueError, TypeError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = label  # argparse uses it in its own messages
    return convert


def size(*, min: int = 1, max: int = parsing.SIZE_MAX):
    """Bytes: see :func:`ringlab.calc.parsing.parse_size`."""
    return _wrap(parsing.parse_size, "size", min=min, max=max)


def count(*, min: int = 1, max: int = parsing.COUNT_MAX):
    """A count with k/M/B/T suffixes: see :func:`ringlab.calc.parsing.parse_count`."""
    return _wrap(parsing.parse_count, "count", min=min, max=max)


class Measured(float):
    """A float read from the command line that remembers what was typed: ``echo()`` -> ``"400 Gb/s = 50 GB/s"``."""

    text: str = ""

    def echo(self) -> str:
        return parsing.echo_quantity(self.text, float(self))


def bandwidth(*, max: float = 1e15):
    """Bytes per second, bits accepted as ``Gb/s`` (a :class:`Measured`): see
    :func:`ringlab.calc.parsing.parse_bandwidth`."""
    parse = _wrap(parsing.parse_bandwidth, "bandwidth", max=max)

    def convert(text: str) -> Measured:
        value = Measured(parse(text))
        value.text = text
        return value

    convert.__name__ = "bandwidth"
    return convert


def duration(*, unit: str = "s", min: float = 0.0, max: float = 86400.0 * 366, min_open: bool = True):
    """Seconds (a bare number is in ``unit``): see :func:`ringlab.calc.parsing.parse_duration`."""
    return _wrap(parsing.parse_duration, "duration", unit=unit, min=min, max=max, min_open=min_open)


def real(*, min: float | None = None, max: float | None = None, min_open: bool = False):
    """A finite float within limits: see :func:`ringlab.calc.parsing.parse_real`."""
    return _wrap(parsing.parse_real, "number", min=min, max=max, min_open=min_open)


def integer(*, min: int | None = None, max: int = parsing.INT64_MAX):
    """A whole number within limits ("1,024" and "1e3" are fine): see :func:`ringlab.calc.parsing.parse_int`.

    ``max`` defaults to the largest int64, so a value numpy holds never overflows on reading."""
    return _wrap(parsing.parse_int, "integer", min=min, max=max)


def check_text(text: str, *, max_len: int = TEXT_MAX) -> str:
    """``text`` unless it is empty, blank, longer than ``max_len`` or holds control characters (ValueError)."""
    if not text.strip():
        raise ValueError("is empty; give a value (leave the option out for its default)")
    if len(text) > max_len:
        raise ValueError(f"is {len(text):,} characters long; at most {max_len:,}")
    bad = next((c for c in text if ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF), None)
    if bad is not None:
        raise ValueError(f"{text[:60]!r} holds the character {bad!r}; control characters and undecodable "
                         "bytes are not allowed")
    return text


def text(*, max_len: int = TEXT_MAX):
    """A name or a path: not empty, no control characters, at most ``max_len`` characters."""

    def convert(value: str) -> str:
        try:
            return check_text(value, max_len=max_len)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = "text"
    return convert


def _check_name_lengths(path: str) -> None:
    for part in path.split(os.sep):
        if len(os.fsencode(part)) > 255:  # NAME_MAX of Linux, macOS and Windows file systems
            raise argparse.ArgumentTypeError(f"{path[:60]!r}...: a file or folder name of {len(os.fsencode(part)):,} "
                                             "bytes; at most 255")


def name_or_path(value: str) -> str:
    """A preset name or a file path (``--model``): :func:`text` plus at most 255 bytes per path component."""
    value = text()(value)
    _check_name_lengths(value)
    return value


def output_file(value: str) -> str:
    """A file to write: its folder must exist and be writable now, before any work starts."""
    path = text()(value)
    _check_name_lengths(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path!r} is a folder; give a file name")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"cannot write {path!r}: folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {path!r}: permission denied")
    return path


def figure_file(value: str) -> str:
    """An image to write (.png, .svg or .pdf), checked as :func:`output_file` is."""
    path = output_file(value)
    if os.path.splitext(path)[1].lower() not in (".png", ".svg", ".pdf"):
        raise argparse.ArgumentTypeError(f"{path[:80]!r}: write the figure to a .png, .svg or .pdf file")
    return path


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_text(data, indent: int | None = 2) -> str:
    """``data`` as RFC 8259 JSON: a NaN or infinite float (no JSON spelling) becomes null."""
    return json.dumps(_finite(data), indent=indent, allow_nan=False)


def read_input(name: str, limit: int = 256 * 2**20) -> bytes:
    """The bytes of file ``name`` (``-`` is stdin), at most ``limit``; ValueError if larger, OSError if unreadable."""
    if name == "-":
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read(limit + 1) if stream is not None else sys.stdin.read(limit + 1).encode("utf-8")
    else:
        with open(name, "rb") as fh:
            data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{name}: larger than {limit:,} bytes; not a log or a table this tool reads")
    return data


def dispatch(prog: str, subcommands: dict[str, tuple[str, str, str]], argv: list[str], *, usage: str,
             noun: str = "subcommand", sort: bool = False) -> int:
    """Run ``prog NAME ARGS...``: call the function ``subcommands[NAME]`` names on ARGS and return its exit code.

    ``subcommands`` maps NAME to ``(module, function, one-line summary)``; the module is imported only when
    NAME is chosen, and the function takes ``argv`` and returns an exit code (None counts as 0). No NAME,
    ``-h`` or ``--help``: print ``usage`` and return 0. An unknown NAME: one line on stderr, ``prog: unknown
    NOUN 'x'; choose one of: a, b`` (the names sorted when ``sort``, else in the table's order), and return 2.
    """
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0
    if argv[0] not in subcommands:
        names = sorted(subcommands) if sort else list(subcommands)
        print(f"{prog}: unknown {noun} {argv[0]!r}; choose one of: {', '.join(names)}", file=sys.stderr)
        return 2
    module, function, _ = subcommands[argv[0]]
    return int(getattr(importlib.import_module(module), function)(argv[1:]) or 0)
