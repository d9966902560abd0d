"""An endpoint call's deadline counts the endpoint's time, not the process's first use of the route."""

import threading
import time

import dspy.clients.lm

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
