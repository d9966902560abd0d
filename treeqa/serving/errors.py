"""What a client may see of an error: one JSON shape with its status, and recorded LM failures
made public (an upstream's error text can echo request headers, keys or internal addresses, so
it stays in the server's log)."""

from __future__ import annotations

from typing import Any

_PUBLIC_FAILURES = (  # (what the error type's name holds, what a client is told); details stay in the log
    (("Timeout",), "the language model did not answer in time"),
    (("RateLimit",), "the language model endpoint is rate-limiting requests"),
    (("Auth", "PermissionDenied", "Billing"), "the language model endpoint refused the request's credentials"),
    (("Connection", "Transport", "Server", "ServiceUnavailable", "BadGateway", "NotFound", "APIError", "Provider"),
     "the language model endpoint could not be reached or failed"),
    (("Parse", "Validation", "JSONDecode"), "the language model's reply could not be read"),
)


def public_failure(failure: dict) -> dict:
    """A failed call as a client may see it: where and what kind, never the upstream text (an
    endpoint's error can echo request headers, keys or internal addresses)."""
    kind = str(failure.get("error", ""))
    message = next((text for names, text in _PUBLIC_FAILURES if any(n in kind for n in names)),
                   "the language model call failed")
    return {"where": failure.get("where"), "error": kind, "message": message}


def scrub(value: Any) -> Any:
    """`value` with every recorded failure (a dict with where/error/message) made public."""
    if isinstance(value, dict):
        if {"where", "error", "message"} <= value.keys():
            return public_failure(value)
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


class ServeError(Exception):
    """An error with its HTTP status, sent as `{"error": message}` (and `failures` where LM calls failed)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None,
                 failures: list[dict] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers, self.failures = status, message, headers or {}, failures

    def body(self) -> dict:
        return {"error": self.message} | ({"failures": self.failures} if self.failures else {})


def no_answer(failures: list[dict]) -> ServeError:
    """A question left without an answer because its LM calls failed: the upstream's fault, so 502
    (504 when it timed out), with the public form of each failure."""
    last = failures[-1]
    status = 504 if "Timeout" in str(last.get("error")) else 502
    return ServeError(status, f"no answer: {last['message']}", failures=failures)

