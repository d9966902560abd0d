"""Every program against a real OpenAI-compatible server: llama.cpp's (llama-cpp-python's server
extra) serving the embedded GGUF on 127.0.0.1, reached the way a user reaches vLLM or a hosted
API (`--lm openai/<name> --api-base URL`), through DSPy's chat adapter. Small settings and one
question each keep it to minutes."""

import threading
import time

import pytest

from tests.fakes import llama_server, local_client, requires_shared_data
from treeqa.evaluation.records import read_records
from treeqa.evaluation.runs import EvalSpec, run_evaluation

pytestmark = [pytest.mark.integration, requires_shared_data]

SMALL = {"tor": {"widths": [2, 2], "expansion": "direct"}, "cor": {"k": 3, "max_turns": 2},
         "beam": {"depth": 1, "beam_size": 2, "max_queries": 1}, "rta": {}, "direct": {},
         "selfask": {"k": 3, "max_follow_ups": 2}, "ircot": {"k": 3, "max_steps": 2},
         "iterretgen": {"k": 3, "rounds": 2}, "react": {"k": 3, "max_iters": 2}, "hop": {"k": 3, "hops": 1}}


@pytest.fixture(autouse=True)
def endpoint_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")  # what users of a local server set


@pytest.mark.parametrize("program", sorted(SMALL))
def test_every_program_parses_a_real_servers_replies(llama_server_url, program, tmp_path):
    spec = EvalSpec(program=program, dataset="hotpotqa", split="dev", n=1, lm="openai/qwen",
                    api_base=llama_server_url, params=SMALL[program], cache=False)
    result = run_evaluation(spec, tmp_path / program)
    (record,) = result["records"]
    print(program, record["prediction"], record["lm_calls"], record["seconds"], record.get("failures"))
    # every call parsed in the end (DSPy's chat adapter retries a reply it cannot read, and the
    # share it read at once is counted: ToR's reviews through a 1.5B model are read at ~80-100%)
    # a tool call with wrong arguments (the 1.5B model sometimes echoes the tool's JSON schema as
    # ReAct's search arguments) is the model's choice, parsed and recorded, not a failed LM call
    lm_failures = [f for f in record.get("failures", []) if f["error"] != "BadToolArguments"]
    assert record["prediction"] and lm_failures == [] and not record.get("error")
    assert 0 < result["summary"]["parse_success"] <= 100.0 and record["lm_calls"] >= 1


def test_relevance_threshold_reads_log_probabilities_from_the_server(llama_server_url, tmp_path):
    spec = EvalSpec(program="tor", dataset="hotpotqa", split="dev", n=1, lm="openai/qwen",
                    api_base=llama_server_url, params={"widths": [2], "expansion": "direct",
                                                       "relevance_threshold": 0.5}, cache=False)
    (record,) = run_evaluation(spec, tmp_path / "R")["records"]
    reviewed = [n for n in record["tree"]["nodes"] if n.get("relevant") is not None]
    assert reviewed and all(n.get("p_relevant") is not None for n in reviewed)
    assert record["tree"]["stats"]["judge_fallbacks"] == 0


def test_optimize_with_the_path_judge_through_the_server(llama_server_url, tmp_path):
    """The path judge compiles without an LM call; both sides of the comparison, and the compiled
    program's demos, then go through the server."""
    from treeqa.optimize import OptimizeSpec, run_optimize
    from treeqa.programs.compiled import load_program

    spec = OptimizeSpec(program="tor", dataset="hotpotqa", optimizer="path-judge", train=100, dev=1,
                        lm="openai/qwen", api_base=llama_server_url, params=SMALL["tor"], cache=False)
    report = run_optimize(spec, tmp_path / "O")["report"]
    assert report["compile"]["optimizer"] == "path-judge" and report["compile"]["lm_calls"] == 0
    compiled = read_records(tmp_path / "O" / "compiled" / "predictions.jsonl")
    (record,) = compiled
    assert record["prediction"] and record["failed_calls"] == 0
    judged = [n for n in record["tree"]["nodes"] if n.get("judge_relevant") is not None]
    assert judged  # the judge decided, at question time, on what the server's program retrieved
    program = load_program(tmp_path / "O" / "compiled.json")
    assert program.path_judge is not None and all(len(p.demos) > 0 for _, p in program.named_predictors())


def test_serve_backed_by_the_server(llama_server_url):
    from treeqa.cli import load_served
    from treeqa.serving import create_app

    served = load_served(None, "direct", "hotpotqa", "dense", "openai/qwen", llama_server_url, cache=False)
    with local_client(create_app(served, concurrency=2, time_limit=300)) as client:
        body = client.post("/v1/ask", json={"question": "What is the capital of France?"}).json()
    assert "paris" in body["answer"].lower() and body["failures"] == [] and body["lm_calls"] == 1


def test_a_server_killed_mid_run_gives_recorded_failures_and_a_resumable_run(tmp_path, settings_env):
    settings_env(lm_timeout=30, lm_retries=0)
    settings = dict(program="direct", dataset="hotpotqa", split="dev", n=3, lm="openai/qwen", cache=False)
    out, done = tmp_path / "R", []
    with llama_server() as url:
        run = threading.Thread(target=lambda: done.append(run_evaluation(EvalSpec(api_base=url, **settings), out)))
        run.start()
        while run.is_alive() and len(read_records(out / "predictions.jsonl")) < 1:
            time.sleep(0.1)
    # the server is gone after the first answer: the questions after it fail, are recorded, and the run goes on
    run.join(timeout=300)
    records = read_records(out / "predictions.jsonl")
    assert len(records) == 3 and done and any(r["failed_calls"] > 0 for r in records)
    assert not records[0]["failed_calls"]
    with llama_server() as url:  # back (on another port: the endpoint is not part of the spec)
        again = run_evaluation(EvalSpec(api_base=url, **settings), out, retry_failed=True)
    assert again["summary"]["failed_calls"] == 0 and len(read_records(out / "predictions.jsonl")) == 3
