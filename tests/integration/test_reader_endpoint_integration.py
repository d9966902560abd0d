"""The released trained reader served by a real llama.cpp server (llama-cpp-python's server with
`--lora_path`), reached as a user reaches it (`--reader-model`), answers as the embedded engine
with the same adapter does: the reader's predictor asks the served model, nothing is mixed."""

import pytest

from tests.fakes import llama_server, requires_shared_data
from treeqa.data import load_examples

pytestmark = [pytest.mark.integration, requires_shared_data]


@pytest.fixture(autouse=True)
def endpoint_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")


def test_the_served_reader_answers_as_the_embedded_one(tmp_path):
    import dspy

    from treeqa.lm import adapter_for, get_lm
    from treeqa.programs.compiled import adapter_lms, load_program, run_adapters_with
    from treeqa.train.attach import attach_to_compiled
    from treeqa.train.released import released_reader

    released = released_reader()
    path, _ = attach_to_compiled("rta", released.adapter, tmp_path / "rta.json", [], "hotpotqa")
    questions = [ex.question for ex in load_examples("hotpotqa", "dev", n=2)]
    local = get_lm("local", cache=False)
    program = load_program(path)
    run_adapters_with(program, local, cache=False)
    with dspy.context(lm=local, adapter=adapter_for(local)):
        embedded = [program(question=q).answer for q in questions]
    with llama_server(logprobs=False, lora=released.adapter, alias="treeqa-reader") as url:
        endpoint = get_lm("openai/treeqa-reader", api_base=url, cache=False)
        served = load_program(path)
        run_adapters_with(served, endpoint, cache=False, reader_model="openai/treeqa-reader")
        assert adapter_lms(served) == {} and served.answer.lm.model.endswith("/treeqa-reader")
        with dspy.context(lm=endpoint, adapter=adapter_for(endpoint)):
            answers = [served(question=q).answer for q in questions]
    print("embedded:", embedded, "served:", answers)
    assert all(answers) and answers == embedded
