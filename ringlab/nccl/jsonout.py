"""Read the JSON that nccl-tests (``-J file.json``) and rccl-tests (``-x file -Z json``) write.

nccl-tests, ``src/util.cu`` (JSON_FILE_VERSION 3, NVIDIA/nccl-tests 2.19.6): one object with
``version``, ``args`` (argv), ``env``, ``nccl_version`` (an int such as 22703), ``config``
(``nthreads``, ``ngpus``, ``minimum_bytes``, ``maximum_bytes``, ... and ``devices``: ``rank``,
``group``, ``pid``, ``hostname``, ``device``, ``device_hex``, ``device_info``), ``results``
(per size: ``size``, ``count``, ``type``, ``redop``, ``root`` as a padded string, ``out_of_place`` /
``in_place`` each ``{time | cpu_time, alg_bw, bus_bw, nwrong}`` or null), ``out_of_bounds``
(``count``, ``okay``) and ``average_bus_bandwidth`` (``bandwidth``, ``okay``).

rccl-tests, ``src/common.cu`` ``Reporter::addResult``: one object per line and half,
``{"name":"AllReduce", "nodes":.., "ranks":.., "ranksPerNode":.., "gpusPerRank":.., "size":..,
"type":"float", "redop":"sum", "inPlace":0, "time":.., "algBw":.., "busBw":.., "wrong":"0"}``
(``"gpus"`` instead of the rank fields without MPI; ``"wrong"``, spelt ``"#wrong"`` in the ``-Z json``
files of ROCm/rccl-tests#93, is ``"N/A"`` when unchecked). A last line cut short (the file of a run
still writing, or killed) is kept as a truncated row; any other line that is not JSON makes the
whole input text.
Times are microseconds and bandwidths GB/s, as in the text report.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

from .lines import Line
from .names import collective_name
from .records import Device, Measure, ParseError, Row, Run


def looks_like_json(text: str) -> bool:
    """True when ``text`` starts with ``{`` or ``[`` (after whitespace)."""
    head = text.lstrip()[:1]
    return head in ("{", "[")


def _line(source: str, number: int, raw: str) -> Line:
    return Line(source, number, raw, raw.strip())


def _program(args) -> str | None:
    for arg in args if isinstance(args, list) else []:
        base = str(arg).rsplit("/", 1)[-1]
        if "_perf" in base:
            return collective_name(base)
    return None


def _measure(half, where: str) -> Measure | None:
    if half is None:
        return None
    if not isinstance(half, dict):
        raise ParseError(f"{where}: a result half must be an object, got {type(half).__name__}")
    try:
        time = half["time"] if "time" in half else half["cpu_time"]
        wrong = half.get("nwrong")
        values = [float(time), float(half["alg_bw"]), float(half["bus_bw"])] + ([] if wrong is None else [float(wrong)])
        if not all(0 <= v < math.inf for v in values):  # NaN, negative, or 1e400 (which json reads as inf)
            raise ParseError(f"{where}: result half {half!r} holds a value that is not a finite number >= 0")
        return Measure(time_us=values[0], algbw=values[1], busbw=values[2],
                       wrong=None if wrong is None else int(round(values[3])))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ParseError):
            raise
        raise ParseError(f"{where}: result half {half!r} lacks time/alg_bw/bus_bw ({exc})") from None


def _iterations(measure: Measure | None, per_iter) -> Measure | None:
    """``measure`` with the ``-I 1`` summary of ``<half>_per_iter`` (nccl-tests src/util.cu writePerIterReport:
    ``min_us``, ``max_us``, ``p99_us``, ``cv_pct``, ``per_process_max_times_us``); unchanged without one."""
    if measure is None or not isinstance(per_iter, dict):
        return measure
    try:
        rows = per_iter.get("per_process_max_times_us")
        per_process = tuple(tuple(float(t) for t in r) for r in rows) if isinstance(rows, list) else None
        return replace(measure, iter_min_us=float(per_iter["min_us"]), iter_max_us=float(per_iter["max_us"]),
                       iter_p99_us=float(per_iter["p99_us"]), iter_cv_pct=float(per_iter["cv_pct"]),
                       per_process_us=per_process)
    except (KeyError, TypeError, ValueError):
        return measure  # a summary of another shape: the averages alone are still right


def _nccl_tests(doc: dict, source: str, text: str) -> Run:
    where = f"{source}:1"
    anchor = _line(source, 1, text.lstrip().splitlines()[0] if text.strip() else "")
    run = Run(start=anchor, collective=_program(doc.get("args")))
    run.collective_evidence = anchor if run.collective else None
    if "nccl_version" in doc:
        code = int(doc["nccl_version"])
        run.versions["nccl"] = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    config = doc.get("config") or {}
    for i, dev in enumerate(config.get("devices") or []):
        try:
            run.devices[int(dev["rank"])] = Device(int(dev["rank"]), str(dev["hostname"]), int(dev["device"]),
                                                   str(dev.get("device_hex", "")), str(dev["device_info"]),
                                                   _line(source, 1, json.dumps(dev)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ParseError(f"{where}: config.devices[{i}] is incomplete ({exc})") from None
    results = doc.get("results")
    if not isinstance(results, list):
        raise ParseError(f"{where}: nccl-tests JSON needs a 'results' list")
    for i, res in enumerate(results):
        try:
            root = str(res.get("root", "-1")).strip()
            run.rows.append(Row(size=int(res["size"]), count=int(res["count"]), dtype=str(res["type"]),
                                redop=res.get("redop"), root=int(root) if root.lstrip("-").isdigit() else None,
                                out_of_place=_iterations(_measure(res.get("out_of_place"), f"{where} results[{i}]"),
                                                         res.get("out_of_place_per_iter")),
                                in_place=_iterations(_measure(res.get("in_place"), f"{where} results[{i}]"),
                                                     res.get("in_place_per_iter")),
                                line=_line(source, 1, json.dumps(res))))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ParseError(f"{where}: results[{i}] is not a result record ({exc})") from None
    oob = doc.get("out_of_bounds") or {}
    if isinstance(oob, dict) and "count" in oob:
        run.out_of_bounds = int(oob["count"])
    avg = doc.get("average_bus_bandwidth") or {}
    if isinstance(avg, dict) and "bandwidth" in avg:
        try:
            run.avg_busbw = float(avg["bandwidth"])
        except (TypeError, ValueError):
            pass
    return run


def _rccl_records(records: list[tuple[int, str, dict]], source: str, cut: tuple[int, str] | None = None) -> list[Run]:
    """Runs of rccl-tests JSON records (one per collective, type and redop); ``cut``: ``(number, raw)`` of a last
    line cut short (a file still being written), kept as the first run's truncated row."""
    runs: dict[tuple, Run] = {}
    halves: dict[tuple, dict] = {}
    for number, raw, rec in records:
        try:
            key = (rec["name"], rec["type"], rec["redop"])
            size, in_place = int(rec["size"]), int(rec["inPlace"])
            wrong = str(rec.get("wrong", rec.get("#wrong", "N/A")))  # "#wrong" in rccl-tests' -Z json (ROCm/rccl-tests#93)
            measure = Measure(time_us=float(rec["time"]), algbw=float(rec["algBw"]), busbw=float(rec["busBw"]),
                              wrong=None if wrong == "N/A" else int(wrong))
        except (KeyError, TypeError, ValueError) as exc:
            raise ParseError(f"{source}:{number}: not an rccl-tests result record ({exc})") from None
        if key not in runs:
            line = _line(source, number, raw)
            run = runs[key] = Run(start=line, collective=collective_name(str(rec["name"])), collective_evidence=line)
            run.header["ranks"] = int(rec.get("ranks", rec.get("gpus", 0))) or None
            run.header["nodes"] = int(rec["nodes"]) if "nodes" in rec else None
        halves.setdefault(key + (size,), {})["in_place" if in_place else "out_of_place"] = (measure, number, raw)
    for (name, dtype, redop, size), got in halves.items():
        first = min(v[1] for v in got.values())
        raw = next(v[2] for v in got.values() if v[1] == first)
        runs[(name, dtype, redop)].rows.append(Row(size=size, count=0, dtype=dtype, redop=redop, root=None,
                                                   out_of_place=got.get("out_of_place", (None,))[0],
                                                   in_place=got.get("in_place", (None,))[0],
                                                   line=_line(source, first, raw)))
    out = list(runs.values())
    if cut is not None and out:
        out[0].truncated.append(_line(source, *cut))
    return out


def read_json(text: str, source: str) -> list[Run]:
    """Runs from nccl-tests or rccl-tests JSON. Raises json.JSONDecodeError for text that is not JSON at
    all (the caller then reads it as lines) and :class:`ParseError` for JSON of another shape."""
    try:
        return _read_json(text, source)
    except RecursionError:
        raise ParseError(f"{source}:1: JSON nested too deeply to be nccl-tests or rccl-tests output") from None


def _read_json(text: str, source: str) -> list[Run]:
    stripped = text.strip()
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError:
        records, cut = [], None
        lines = [(number, raw) for number, raw in enumerate(text.splitlines(), start=1) if raw.strip()]
        for i, (number, raw) in enumerate(lines):
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError:
                if i == len(lines) - 1 and records and raw.lstrip().startswith("{"):
                    cut = (number, raw)  # the last record cut short: the writer was stopped mid-line
                    break
                raise  # not JSON lines either: the caller reads the text as lines
            if not (isinstance(rec, dict) and "busBw" in rec):
                raise json.JSONDecodeError("not an rccl-tests JSON line", raw, 0)
            records.append((number, raw, rec))
        return _rccl_records(records, source, cut)
    if isinstance(doc, dict) and "results" in doc:
        return [_nccl_tests(doc, source, text)]
    if isinstance(doc, dict) and "busBw" in doc:
        return _rccl_records([(1, stripped, doc)], source)
    if isinstance(doc, list) and doc and all(isinstance(r, dict) and "busBw" in r for r in doc):
        return _rccl_records([(i + 1, json.dumps(r), r) for i, r in enumerate(doc)], source)
    raise ParseError(f"{source}:1: JSON, but neither nccl-tests (-J) nor rccl-tests output: "
                     f"top-level {type(doc).__name__} with keys {sorted(doc)[:8] if isinstance(doc, dict) else '...'}")
