"""Calling a predictor so one failed LM call never kills the whole question."""

from __future__ import annotations

import logging

import dspy

log = logging.getLogger(__name__)


def record_failure(failures: list[dict], where: str, exc: BaseException) -> None:
    failures.append({"where": where, "error": type(exc).__name__, "message": str(exc)[:500]})
    log.warning("LM call %s failed: %s: %s", where, type(exc).__name__, str(exc)[:200])


def safe_call(predictor: dspy.Module, failures: list[dict], where: str, **inputs) -> dspy.Prediction | None:
    """Run `predictor(**inputs)`; on any error (parse failure, timeout, server error) record it
    in `failures` under `where` and return None, so the caller can drop or down-score that branch."""
    try:
        return predictor(**inputs)
    except Exception as exc:  # noqa: BLE001 - every LM-side failure is recorded, none propagates
        record_failure(failures, where, exc)
        return None
