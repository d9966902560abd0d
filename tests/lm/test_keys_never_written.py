"""Keys never reach a file: the command line as the shell gives it (`sys.argv` set, as a real
`treeqa` process has it), an upstream whose errors echo the Authorization header, and
credentials inside `--api-base`; every file of the run, the output and the log are searched."""

import logging
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes import FakeEndpoint, generic_responder
from tests.fakes.lm import Call
from treeqa.cli import app
from treeqa.settings import recorded_command, redact, remember_secret, without_userinfo

KEY = "sk-live-7f3a9c1e5b"
PASSWORD = "pw/secret+42"  # percent-encoded in the URL
BASIC = "YWxpY2U6cHcvc2VjcmV0KzQy"  # alice:PASSWORD, as the Basic credentials the client sends from the URL
SECRETS = (KEY, PASSWORD, "pw%2Fsecret", BASIC)
ANSWERS = {"Rigi Railway company": "Lake Zurich", "cog railway": "1871", "Weggis": "no"}


def echoing_upstream(fail_on: str = "Weggis"):
    """Answers like a model, except questions holding `fail_on`: a 401 whose text echoes the
    request's Authorization header, as some gateways do."""
    respond = generic_responder(ANSWERS)

    def reply(n, body, headers):
        text = " ".join(str(m.get("content")) for m in body["messages"])
        if fail_on in text:
            return 401, f"invalid credentials: Authorization: {headers.get('Authorization')} api_key={KEY}", 0
        return 200, respond(Call("endpoint", {}, False, body["messages"])), 0

    return FakeEndpoint(reply)


@pytest.fixture
def shell(monkeypatch, fixture_data, settings_env):
    """Run `treeqa ARGS` with sys.argv set as the shell sets it; no key in the environment."""
    for name in ("OPENAI_API_KEY", "HOSTED_VLLM_API_KEY", "TREEQA_API_KEY"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    settings_env(lm_timeout=20, lm_retries=0)

    def run(*args: str):
        monkeypatch.setattr(sys, "argv", ["/usr/local/bin/treeqa", *args])
        return CliRunner().invoke(app, list(args))

    return run


def _with_password(url: str) -> str:
    return url.replace("http://", "http://alice:pw%2Fsecret%2B42@")


def _leaks(folder: Path, *texts: str) -> list[str]:
    found = [str(p) for p in folder.rglob("*") if p.is_file()
             and any(s in p.read_bytes().decode("utf-8", "replace") for s in SECRETS)]
    return found + [t[:200] for t in texts if any(s in t for s in SECRETS)]


def test_2_3_evaluate_writes_no_key_from_the_command_line_the_upstream_or_the_url(shell, tmp_path, caplog):
    out = tmp_path / "run"
    caplog.set_level(logging.DEBUG)
    with echoing_upstream() as ep:
        result = shell("evaluate", "--program", "direct", "--n", "2", "--lm", "openai/m", "--api-base",
                       _with_password(ep.url), "--api-key", KEY, "--no-cache", "--out", str(out))
    assert result.exit_code == 0, result.output
    records = (out / "predictions.jsonl").read_text()
    assert "invalid credentials" in records and "[redacted]" in records  # the failure is kept, its key is not
    assert "--api-key" in (out / "summary.json").read_text()
    assert not _leaks(out, result.output, caplog.text)
    assert '"api_base": "http://127.0.0.1:' in (out / "spec.json").read_text()


def test_2_3_optimize_writes_no_key_in_its_report_or_either_side(shell, tmp_path, caplog):
    out = tmp_path / "opt"
    caplog.set_level(logging.DEBUG)
    with echoing_upstream() as ep:
        result = shell("optimize", "--program", "direct", "--train", "1", "--dev", "2", "--lm", "openai/m",
                       f"--api-base={_with_password(ep.url)}", f"--api-key={KEY}", "--no-cache", "--out", str(out))
    assert result.exit_code == 0, result.output
    for name in ("report.json", "report.md", "compiled/summary.json", "zero-shot/summary.json"):
        assert "--api-key=[redacted]" in (out / name).read_text(), name
    assert not _leaks(out, result.output, caplog.text)


def test_3_ask_prints_no_key_an_upstream_echoes(shell):
    with echoing_upstream(fail_on="") as ep:
        result = shell("ask", "Is Weggis a town?", "--program", "direct", "--no-cache", "--lm", "openai/m",
                       "--api-base", _with_password(ep.url), "--api-key", KEY)
    assert result.exit_code == 1
    assert "failed call" in result.output and not _leaks(Path("/nonexistent"), result.output)


def test_3_serve_logs_no_key_an_upstream_echoes(fixture_data, settings_env, caplog):
    from tests.fakes import local_client
    from treeqa.cli import load_served
    from treeqa.serving import create_app

    settings_env(lm_timeout=20, lm_retries=0, api_key=KEY)  # what `serve --api-key` sets
    caplog.set_level(logging.WARNING)
    with echoing_upstream(fail_on="") as ep:
        served = load_served(None, "direct", "hotpotqa", None, "openai/m", _with_password(ep.url), cache=False)
        response = local_client(create_app(served)).post("/v1/ask", json={"question": "Is Weggis a town?"})
    assert response.status_code == 502
    assert "LM call" in caplog.text
    assert not _leaks(Path("/nonexistent"), response.text, caplog.text)


def test_redact_covers_keys_bearer_basic_and_userinfo():
    remember_secret("k-given-to-get-lm-9")
    text = ("Authorization: Bearer abc.DEF-123 and basic dXNlcjpwYXNz, k-given-to-get-lm-9 and k-given-to-get-lm-9"
            " percent-encoded: k-given-to-get-lm-9; https://bob:p%40ss@host/v1 'api_key': 'zzz'")
    clean = redact(text)
    for secret in ("abc.DEF-123", "dXNlcjpwYXNz", "k-given-to-get-lm-9", "bob", "p%40ss", "zzz"):
        assert secret not in clean
    assert without_userinfo("https://bob:p%40ss@host:8/v1") == "https://host:8/v1"
    assert recorded_command(["/bin/treeqa", "ask", "q", "--api-key", "s3cr3t-value", "--lm", "x"]) == (
        "treeqa ask q --api-key '[redacted]' --lm x")


def test_a_recorded_command_names_paths_inside_the_working_folder_relative_to_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inside, outside = tmp_path / "runs" / "x", "/elsewhere/compiled.json"
    assert recorded_command(["/bin/treeqa", "evaluate", "--out", str(inside), "--compiled", outside,
                             f"--out={inside}", f"--source={outside}", "q/a"]) == (
        f"treeqa evaluate --out runs/x --compiled {outside} --out=runs/x --source={outside} q/a")
