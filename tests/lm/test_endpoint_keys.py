"""Endpoints with keys: `--api-key` (or TREEQA_API_KEY) reaches the server as a bearer token on
every command that takes `--lm`; `openai/<model>` at a hosted base URL is sent the OpenAI key its
name implies; a provider that refuses a field it does not know (llama.cpp's repeat_penalty) is
asked again without it, and a server of one's own still gets it (greedy, unpenalised)."""

import json

import pytest
from typer.testing import CliRunner

import treeqa.lm
from tests.fakes import FakeEndpoint
from treeqa.cli import app

KEY = "sk-test-4f1d0c"
KNOWN_FIELDS = {"model", "messages", "temperature", "max_tokens", "max_completion_tokens", "stream", "n", "stop",
                "top_p", "response_format", "logprobs", "top_logprobs", "seed", "user"}


class StrictProvider:
    """A hosted OpenAI-compatible provider: a bearer token or 401, and 400 naming any field it
    does not know, as OpenAI's API answers one."""

    def __init__(self, answer: str = "Paris"):
        self.answer, self.bodies, self.tokens = answer, [], []

    def __call__(self, n: int, body: dict, headers: dict) -> tuple[int, str, float]:
        self.bodies.append(body)
        self.tokens.append(headers.get("Authorization"))
        if headers.get("Authorization") != f"Bearer {KEY}":
            return 401, "Incorrect API key provided", 0
        unknown = sorted(set(body) - KNOWN_FIELDS)
        if unknown:
            return 400, f"Unrecognized request argument supplied: {unknown[0]}", 0
        return 200, f"[[ ## answer ## ]]\n{self.answer}\n\n[[ ## completed ## ]]", 0


@pytest.fixture
def no_keys(monkeypatch, settings_env):
    for name in ("OPENAI_API_KEY", "HOSTED_VLLM_API_KEY", "TREEQA_API_KEY"):
        monkeypatch.setenv(name, "")  # recorded, so what --api-key sets is undone after the test
        monkeypatch.delenv(name)
    settings_env(lm_timeout=20, lm_retries=0)


def ask(*args: str):
    return CliRunner().invoke(app, ["ask", "What is the capital of France?", "--program", "direct", "--no-cache",
                                    *args])


def test_api_key_reaches_a_provider_that_requires_it_and_unknown_fields_are_dropped(no_keys):
    provider = StrictProvider()
    with FakeEndpoint(provider) as ep:
        refused = ask("--lm", "openai/m", "--api-base", ep.url)
        answered = ask("--lm", "openai/m", "--api-base", ep.url, "--api-key", KEY)
    assert refused.exit_code == 1 and "401" in refused.output and KEY not in refused.output
    assert answered.exit_code == 0, answered.output
    assert answered.output.strip().splitlines()[-1] == "Paris"
    # the key was sent as a bearer token; llama.cpp's repeat_penalty was refused once, then left out
    assert provider.tokens[-1] == f"Bearer {KEY}"
    assert "repeat_penalty" in provider.bodies[-2] and "repeat_penalty" not in provider.bodies[-1]
    assert KEY not in answered.output


def test_the_key_comes_from_treeqa_api_key_or_the_openai_key_the_name_implies(no_keys, monkeypatch, settings_env):
    provider = StrictProvider()
    with FakeEndpoint(provider) as ep:
        settings_env(api_key=KEY)
        assert ask("--lm", "openai/m", "--api-base", ep.url).exit_code == 0
        monkeypatch.delenv("TREEQA_API_KEY")
        settings_env()
        monkeypatch.setenv("OPENAI_API_KEY", KEY)  # what `openai/...` names, whichever dialect it is spoken in
        result = ask("--lm", "openai/m", "--api-base", ep.url)
    assert result.exit_code == 0, result.output
    assert provider.tokens[-1] == f"Bearer {KEY}"


def test_a_server_of_ones_own_still_decodes_unpenalised(no_keys):
    bodies = []

    def permissive(n, body, headers):
        bodies.append(body)
        return 200, "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]", 0

    with FakeEndpoint(permissive) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="none", cache=False)
        lm("one")
        lm("two")
    assert [b.get("repeat_penalty") for b in bodies] == [1.0, 1.0]
    assert [b.get("temperature") for b in bodies] == [0.0, 0.0]


def test_a_refused_field_is_dropped_once_for_that_endpoint(no_keys):
    provider = StrictProvider()
    with FakeEndpoint(provider) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key=KEY, cache=False)
        assert lm("one") == ["[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"]
        lm("two")
    assert ["repeat_penalty" in b for b in provider.bodies] == [True, False, False]


def test_a_refusal_that_names_no_field_we_added_is_the_callers_error(no_keys):
    with FakeEndpoint(lambda n, body, headers: (400, "Unrecognized request argument supplied: frobnicate", 0)) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key=KEY, cache=False)
        with pytest.raises(Exception, match="frobnicate"):
            lm("one")
        assert ep.requests == 1


def test_the_key_is_never_written_to_a_run(no_keys, tmp_path, fixture_data, settings_env):
    provider = StrictProvider(answer="Cincinnati")
    out = tmp_path / "run"
    with FakeEndpoint(provider) as ep:
        result = CliRunner().invoke(app, ["evaluate", "--program", "direct", "--dataset", "hotpotqa", "--n", "1",
                                          "--lm", "openai/m", "--api-base", ep.url, "--api-key", KEY,
                                          "--no-cache", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert provider.tokens[-1] == f"Bearer {KEY}"
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    assert json.loads((out / "spec.json").read_text())["lm"] == "openai/m"
