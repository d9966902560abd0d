"""A run's records, one JSON line per question: found in a run folder (plain, or compressed once
the run is finished), read back (skipping what cannot be a record), appended, rewritten
atomically, summarized."""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from statistics import mean
from typing import Any

from treeqa.data.answers import RECALL_K
from treeqa.evaluation.stats import run_intervals

log = logging.getLogger(__name__)


MAX_RECORD_BYTES = 32 << 20  # one question's record, its search tree included (a real one is under 1 MB)
RECORDS_NAME = "predictions.jsonl"  # what a run appends to, one record a question
COMPRESSED_SUFFIX = ".gz"  # a finished run's records may be kept compressed (those under benchmarks/runs are)


def _compressed(path: Path) -> Path:
    return path.with_name(path.name + COMPRESSED_SUFFIX)


def records_file(run_dir: str | Path) -> Path:
    """The records file of a run folder: `predictions.jsonl`, or `predictions.jsonl.gz` where
    only the compressed one is there (a finished run, kept compressed); the plain name where
    there is neither (where a run writes). A folder with both is refused: which of the two
    holds the run is not known."""
    plain = Path(run_dir) / RECORDS_NAME
    packed = _compressed(plain)
    if not os.path.lexists(packed):
        return plain
    if os.path.lexists(plain):
        raise ValueError(f"{run_dir} holds both {RECORDS_NAME} and {packed.name}: keep the one that holds "
                         "the run's records and remove the other")
    return packed


def refuse_compressed(path: Path) -> None:
    """Before a run appends to `path` (resumes): where the run's records are compressed beside
    it, appending would start a second file of records; refused, saying how to resume."""
    packed = _compressed(Path(path))
    if os.path.lexists(packed):
        raise ValueError(f"{packed} holds this run's records compressed: to resume the run, decompress them "
                         f"first (gunzip {packed})")


def check_whole(source_dir: Path) -> None:
    """Refuse a run whose compressed records are cut short or corrupt (read to the end, never
    held): a run that starts from them would stop halfway through the copy."""
    source = records_file(source_dir)
    if not source.is_file() or not source.name.endswith(COMPRESSED_SUFFIX):
        return
    try:
        with _open_binary(source) as src:
            while src.read(1 << 20):
                pass
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
        raise ValueError(f"{source} is cut short or corrupt ({exc}): its records cannot be taken whole") from None


def copy_records(source_dir: Path, out_dir: Path) -> None:
    """Copy a run's records into `out_dir` as the plain file a run appends to (decompressed if
    the source's are compressed); a source without records copies nothing. The copy is whole
    or absent: written beside the target and renamed into place."""
    source = records_file(source_dir)
    if not source.is_file():
        return
    target = Path(out_dir) / RECORDS_NAME
    refuse_compressed(target)
    tmp = target.with_name(target.name + ".adopting")
    try:
        with _open_binary(source) as src, tmp.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, target)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ValueError(f"{source} is cut short or corrupt ({exc}): its records cannot be taken whole") from None
    finally:
        tmp.unlink(missing_ok=True)


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _lines(fh, limit: int):
    """(line number, bytes) of a binary file, with None for a line over `limit` bytes, which is
    read past in chunks and never held whole."""
    lineno = 0
    while True:
        raw = fh.readline(limit + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield lineno, None
            continue
        yield lineno, raw


def _open_binary(path: Path):
    """The file's bytes, decompressed when its name ends in `.gz`."""
    return gzip.open(path, "rb") if path.name.endswith(COMPRESSED_SUFFIX) else path.open("rb")


def read_records(path: Path, skipped: list[str] | None = None) -> list[dict]:
    """Records of an earlier run, one per question id (a later line for an id replaces an
    earlier one); a `.gz` file is read decompressed (`records_file` finds a folder's). A line
    that cannot be a record (torn by a kill mid-write, not UTF-8, nested too deeply to parse,
    holding NaN or a number that is not finite, over MAX_RECORD_BYTES, not a JSON object with an
    `id` and numeric `em` and `f1`) is skipped with a warning naming the file and line; a
    compressed file cut short or corrupt keeps the records before the fault, with a warning.
    `skipped`, when given, gets one line for each such fault (what a page of the run must name)."""
    path = Path(path)
    if not path.is_file():
        return []
    records: dict[str, dict] = {}
    noted = skipped if skipped is not None else []
    with _open_binary(path) as fh:
        try:
            _read_into(records, path, fh, noted)
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            log.warning("%s: compressed records cut short or corrupt (%s); %d records read before it",
                        path, exc, len(records))
            noted.append(f"{path}: compressed records cut short or corrupt after {len(records)} records")
    return list(records.values())


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 reads as infinity
        raise ValueError(f"number {text[:40]} is not finite")
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a record may hold")


def _read_into(records: dict[str, dict], path: Path, fh, noted: list[str]) -> None:
    def skip(lineno: int, why: str) -> None:
        log.warning("%s, line %d: skipped, %s", path, lineno, why)
        noted.append(f"{path}, line {lineno}: {why}")

    for lineno, raw in _lines(fh, MAX_RECORD_BYTES):
        if raw is None:
            skip(lineno, f"over {MAX_RECORD_BYTES} bytes (not a record)")
            continue
        if not raw.strip():
            continue
        try:
            # NaN, Infinity and numbers too large for a float are refused: figures summed from them are not
            record = json.loads(raw.decode("utf-8"), parse_float=_finite_float, parse_constant=_no_constant)
        except ValueError as exc:  # not UTF-8, not JSON, a number that is not finite
            skip(lineno, f"not a readable record ({str(exc)[:200]})")
            continue
        except RecursionError:
            skip(lineno, "nested too deeply to be a record")
            continue
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            skip(lineno, "a record needs a string id")
            continue
        if not all(_finite_number(record.get(key)) for key in ("em", "f1")):
            skip(lineno, "a record needs numbers 'em' and 'f1'")
            continue
        records[record["id"]] = record


def rewrite_records(path: Path, records: list[dict]) -> None:
    """Replace the file with `records`, atomically (a kill leaves the old file or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def failed(record: dict) -> bool:
    """A question to run again with `--retry-failed`: it raised, or some LM call failed."""
    return bool(record.get("error")) or record.get("failed_calls", 0) > 0


def open_for_append(path: Path):
    """Append mode, starting on a fresh line if an earlier run was killed mid-record."""
    sink = path.open("a", encoding="utf-8")
    if path.stat().st_size:
        with path.open("rb") as fh:
            fh.seek(-1, 2)
            if fh.read(1) != b"\n":
                sink.write("\n")
    return sink


def summarize(records: Iterable[dict]) -> dict[str, float]:
    """Mean figures over records: EM and F1 in percent, costs per question."""
    records = list(records)
    if not records:
        return {"n": 0}
    out: dict[str, float] = {
        "n": len(records),
        "em": round(100 * mean(r["em"] for r in records), 2),
        "f1": round(100 * mean(r["f1"] for r in records), 2),
        **run_intervals(records),
    }
    recalls = [r[f"recall@{RECALL_K}"] for r in records if f"recall@{RECALL_K}" in r]
    if recalls:
        out[f"recall@{RECALL_K}"] = round(100 * mean(recalls), 2)
        if len(recalls) < len(records):  # e.g. NQ: only questions whose gold passage is in the corpus
            out[f"recall@{RECALL_K}_questions"] = len(recalls)
    hits = [r[f"answer_hit@{RECALL_K}"] for r in records if f"answer_hit@{RECALL_K}" in r]
    if hits:
        out[f"answer_hit@{RECALL_K}"] = round(100 * mean(hits), 2)
    for key in ("lm_calls", "prompt_tokens", "prompt_tokens_cached", "completion_tokens", "seconds"):
        out[f"{key}_per_q"] = round(mean(r.get(key, 0) for r in records), 2)
    if all("lm_seconds" in r for r in records) and sum(r["seconds"] for r in records) > 0:
        out["overhead_pct"] = round(100 * (1 - sum(r["lm_seconds"] for r in records)
                                           / sum(r["seconds"] for r in records)), 2)
    timed = [r for r in records if "lm_seconds_by_predictor" in r]
    if timed:  # where a question's LM time goes, per predictor (records since 2026-11-25)
        names = sorted({name for r in timed for name in r["lm_seconds_by_predictor"]})
        out["lm_seconds_per_q_by_predictor"] = {
            name: round(mean(r["lm_seconds_by_predictor"].get(name, 0.0) for r in timed), 2) for name in names}
        if len(timed) < len(records):  # a run resumed from records made before they were kept
            out["lm_seconds_per_q_by_predictor_questions"] = len(timed)
    attempts = sum(sum(r.get("parse_attempts", {}).values()) for r in records)
    if attempts:
        failed = sum(sum(r.get("parse_failures", {}).values()) for r in records)
        out["parse_success"] = round(100 * (1 - failed / attempts), 2)
    out["failed_calls"] = sum(r.get("failed_calls", 0) for r in records)
    out["errors"] = sum(1 for r in records if r.get("error"))
    return out

