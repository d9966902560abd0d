"""An endpoint call's deadline: every call has one (TREEQA_LM_TIMEOUT), retries included, and it
counts the endpoint's time, not the process's first use of the route."""

import threading
import time

import dspy.clients.lm
import pytest

import treeqa.lm
from tests.fakes import FakeEndpoint


def test_a_slow_first_use_of_the_client_is_not_counted_against_the_deadline(settings_env, monkeypatch):
    """The first call of a process imports LiteLLM (13-70 s on a busy 2-core machine): here a
    3 s import stands in for it. With a 1 s deadline, a server that answers at once answers."""
    real, first = dspy.clients.lm._get_litellm, threading.Event()

    def slow_first_import():
        if not first.is_set():
            first.set()
            time.sleep(3)
        return real()

    monkeypatch.setattr(dspy.clients.lm, "_get_litellm", slow_first_import)
    settings_env(lm_timeout=1.0, lm_retries=0)
    with FakeEndpoint(lambda n, body, headers: (200, "Paris", 0)) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        assert lm("The capital of France?") == ["Paris"]
        assert first.is_set() and ep.requests == 1  # the warm-up went to a closed port, not to the server


def test_a_server_waits_for_the_warm_up_once_and_later_routes_start_at_once(settings_env):
    settings_env(lm_timeout=5.0)
    with FakeEndpoint(lambda n, body, headers: (200, "Paris", 0)) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        lm.wait_ready()
        again = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        started = time.monotonic()
        again.wait_ready()  # the same route, warmed once a process
        assert time.monotonic() - started < 0.5
        assert again("hi") == ["Paris"] and ep.requests == 1


# benchmarks/faults.md, first round #12: a dead endpoint stops the run; endpoint calls have a timeout

def test_12_endpoints_get_a_per_call_timeout(settings_env):
    settings_env(lm_timeout=7.5)
    assert treeqa.lm.get_lm("hosted_vllm/m", api_base="http://127.0.0.1:9/v1").kwargs["timeout"] == 7.5


# benchmarks/faults.md, second round #7: one deadline per call, retries included

def test_7_a_hung_endpoint_fails_the_call_at_the_deadline(settings_env):
    settings_env(lm_timeout=1.0, lm_retries=3)
    with FakeEndpoint(lambda n, body, headers: (200, "late", 10)) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        lm.wait_ready()  # the process's first use of the route is not the call's (the tests above)
        started = time.monotonic()
        with pytest.raises(treeqa.lm.EndpointTimeoutError, match=f"{ep.url}: no answer within 1 s"):
            lm("hello")
        assert time.monotonic() - started < 3  # not 4 attempts of 1 s and their back-off
        assert ep.requests == 1


def test_7_transient_errors_are_retried_within_the_deadline(settings_env):
    settings_env(lm_timeout=20, lm_retries=2)
    with FakeEndpoint(lambda n, body, headers: (503, "busy", 0) if n == 0 else (200, "fine", 0)) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        assert lm("hello") == ["fine"] and ep.requests == 2
    with FakeEndpoint(lambda n, body, headers: (401, "bad key", 0)) as ep:  # not transient: one request
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        with pytest.raises(Exception) as raised:
            lm("hello")
        assert ep.requests == 1 and ep.url in " ".join(getattr(raised.value, "__notes__", []))


def test_the_warm_up_probes_a_reasoning_models_route_too(settings_env, monkeypatch):
    """DSPy renames a reasoning model's token cap to max_completion_tokens; the probe built from
    the LM's settings must pass it back as the cap, not raise in its background thread."""
    import dspy

    from treeqa.lm import _endpoint, get_lm

    lm = get_lm("openai/o3", api_key="k")
    probed = []
    monkeypatch.setattr(dspy.LM, "__call__", lambda self, *a, **k: probed.append(dict(self.kwargs)))
    _endpoint._first_use(lm)
    assert len(probed) == 1 and probed[0]["api_base"] == _endpoint._CLOSED_PORT
    assert probed[0].get("max_completion_tokens") == lm.kwargs.get("max_completion_tokens")
