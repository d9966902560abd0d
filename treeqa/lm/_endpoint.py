"""A `dspy.LM` for a remote endpoint, with what DSPy's leaves to the caller.

- One total deadline per call, retries and their back-off included. DSPy's `timeout` bounds
  each wait for a byte and each retry starts it again, so a call with a 3 s timeout took 20 s
  over 4 requests; here `deadline` is the most one call can hold a caller (a serve slot, a
  question), whatever the endpoint does.
- Retries with exponential back-off (or the server's Retry-After) on the errors DSPy counts as
  transient (429, 5xx, timeouts, dropped connections), within that deadline.
- The response cache keyed by the endpoint too: DSPy's key leaves out `api_base`, so two
  servers of the same model name would share answers (a dead endpoint answered from another's).
- Errors that name the endpoint.
- Optional fields treeqa adds for servers of one's own (llama.cpp's `repeat_penalty`) left out,
  for that LM from then on, when a provider refuses one by name (a 400): hosted providers may
  refuse fields they do not know.
- The deadline counts the endpoint's time, not the process's warm-up. A process's first call
  imports LiteLLM, builds DSPy's router and loads a tokenizer table (which of these a call needs
  is decided per request, deep in DSPy): 13-70 s on a busy 2-core machine, which failed a 3 s
  deadline against a server that answered at once. So each EndpointLM sends one call down the
  same path to a closed local port in the background as it is made (overlapping the rest of the
  start-up), and a call's clock starts once that is done.

Past its deadline an attempt is abandoned, not killed (an HTTP read cannot be interrupted from
outside); it ends by itself within DSPy's per-request timeout, which is set to the deadline.
"""

from __future__ import annotations

import contextvars
import copy
import logging
import threading
import time
from typing import Any

import dspy
from dspy.utils.exceptions import is_retryable_lm_error

from treeqa.settings import without_userinfo

log = logging.getLogger(__name__)
_CACHE_IGNORED = ("api_key",)
_CLOSED_PORT = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there, the connection is refused
_WARM_UPS: dict[tuple[str, str], threading.Thread] = {}
_WARM_UPS_LOCK = threading.Lock()


class EndpointTimeoutError(TimeoutError):
    """The endpoint gave no answer within the call's total deadline."""


class EndpointLM(dspy.LM):
    """`dspy.LM(model, api_base=...)` with a total deadline, bounded retries and an endpoint-keyed cache.

    Example:
        >>> lm = EndpointLM("openai/qwen", api_base="http://127.0.0.1:8080/v1", api_key="none", deadline=60)
        >>> dspy.configure(lm=lm)
    """

    def __init__(self, model: str, *, deadline: float, retries: int = 2, cache: bool = True, **kwargs):
        if not deadline > 0:
            raise ValueError(f"deadline must be a positive number of seconds, got {deadline}")
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries}")
        kwargs.setdefault("timeout", deadline)
        super().__init__(model, cache=False, num_retries=0, **kwargs)  # retries and caching are done here
        self.deadline, self.retries, self.response_cache = float(deadline), retries, cache
        # the name errors and logs give it: without a URL's credentials
        self.endpoint = without_userinfo(kwargs.get("api_base")) or f"{model.split('/')[0]}'s default endpoint"
        _warm_up(self)

    def __call__(self, prompt=None, *, messages=None, **kwargs):
        use_cache = self.response_cache and kwargs.pop("cache", True)
        key = self._cache_key(prompt, messages, kwargs) if use_cache else None
        if key is not None and (hit := dspy.cache.get(key)) is not None:
            return copy.deepcopy(hit)
        outputs = self._within_deadline(prompt, messages, kwargs)
        if key is not None:
            dspy.cache.put(key, outputs)
        return outputs

    def wait_ready(self) -> None:
        """Wait for this route's first-use warm-up (started when the LM was made): a server
        calls it at start-up so that its first request is not the slow one."""
        _warm_up(self).join()

    def _cache_key(self, prompt, messages, kwargs) -> dict[str, Any]:
        settings = {k: v for k, v in {**self.kwargs, **kwargs}.items() if k not in _CACHE_IGNORED}
        return {"_fn_identifier": "treeqa.lm.EndpointLM", "endpoint": self.endpoint, "model": self.model,
                "model_type": self.model_type, "prompt": prompt, "messages": messages, **settings}

    def _within_deadline(self, prompt, messages, kwargs):
        self.wait_ready()  # never counted against an endpoint's deadline
        ends = time.monotonic() + self.deadline
        attempt = 0
        while True:
            try:
                return self._attempt(prompt, messages, kwargs, ends - time.monotonic())
            except Exception as exc:  # noqa: BLE001 - retried when transient, else raised as it is
                if self._drop_refused_fields(exc):
                    continue  # asked again at once without them; not a retry
                left = ends - time.monotonic()
                delay = _backoff(exc, attempt)
                if attempt == self.retries or not is_retryable_lm_error(exc) or delay >= left:
                    if not isinstance(exc, EndpointTimeoutError):
                        exc.add_note(f"endpoint {self.endpoint}: {attempt + 1} attempt(s)")
                    raise
                time.sleep(delay)
                attempt += 1

    def _drop_refused_fields(self, exc: Exception) -> bool:
        """Leave out, for this LM from now on, the optional fields treeqa added (`extra_body`:
        llama.cpp's repeat_penalty) that the server refused by name with a 400: a hosted provider
        may refuse a field it does not know, where a server of one's own reads it."""
        extra = self.kwargs.get("extra_body") or {}
        if getattr(exc, "status", None) != 400 or not extra:
            return False
        refused = [field for field in extra if field in str(exc)]
        if not refused:
            return False
        self.kwargs = {**self.kwargs, "extra_body": {k: v for k, v in extra.items() if k not in refused}}
        log.warning("%s refused the field(s) %s: asking it again without them", self.endpoint, ", ".join(refused))
        return True

    def _attempt(self, prompt, messages, kwargs, seconds: float):
        """One request, given up on (not killed) after `seconds`."""
        if seconds <= 0:
            raise EndpointTimeoutError(f"{self.endpoint}: no answer within {self.deadline:g} s, retries included")
        outcome: dict[str, Any] = {}
        context = contextvars.copy_context()  # DSPy's settings (usage tracker, callbacks) go with the request

        def request() -> None:
            try:
                outcome["value"] = context.run(super(EndpointLM, self).__call__, prompt, messages=messages,
                                               **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                outcome["error"] = exc

        worker = threading.Thread(target=request, daemon=True, name="treeqa-endpoint-call")
        worker.start()
        worker.join(seconds)
        if worker.is_alive():
            raise EndpointTimeoutError(f"{self.endpoint}: no answer within {self.deadline:g} s, retries included")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]


def _warm_up(lm: EndpointLM) -> threading.Thread:
    """The background warm-up of `lm`'s route (model and endpoint), started once a process."""
    route = (lm.model, lm.endpoint)
    with _WARM_UPS_LOCK:
        if route not in _WARM_UPS:
            _WARM_UPS[route] = threading.Thread(target=_first_use, args=(lm,), daemon=True,
                                                name="treeqa-endpoint-warm-up")
            _WARM_UPS[route].start()
        return _WARM_UPS[route]


def _first_use(lm: EndpointLM) -> None:
    """One call down `lm`'s own path to a closed local port, refused at once: what that path
    loads on first use (client libraries, routers, tokenizer tables) loads here."""
    # a fresh LM, not a copy: a copy would share (and set up) the original's client, bound to the closed port.
    # The cap and temperature go back in as the arguments they came from: DSPy renames the cap of a
    # reasoning model to max_completion_tokens, and passing that name again is a TypeError.
    kwargs = dict(lm.kwargs)
    cap = kwargs.pop("max_completion_tokens", None) or kwargs.pop("max_tokens", None)
    kwargs.pop("max_tokens", None)
    try:
        probe = dspy.LM(lm.model, model_type=lm.model_type, temperature=kwargs.pop("temperature", None),
                        max_tokens=cap, cache=False, num_retries=0,
                        **{**kwargs, "api_base": _CLOSED_PORT, "timeout": 10})
        probe("warm-up")
    except Exception:  # noqa: BLE001 - refused, as intended; a real fault shows on the real call
        pass


def _backoff(exc: Exception, attempt: int) -> float:
    """Seconds before the next attempt: the server's Retry-After when it gave one (capped), else 1, 2, 4, ..."""
    hint = getattr(exc, "retry_after", None)
    if isinstance(hint, (int, float)) and 0 <= hint < float("inf"):
        return min(float(hint), 30.0)
    return min(2.0 ** attempt, 30.0)
