"""`treeqa train score`: a reader's validation EM on a built set's reads, answered as the program
calls its reader (its adapter included), resumable, filtered by kind."""

import json

import treeqa.lm
from tests.fakes import compiled_with_adapter, loaded_adapter, run_cli
from tests.fakes.lm import scripted_lm, use_lm


def write_set(folder, side="validation"):
    folder.mkdir()
    reads = []
    for i, (kind, shown) in enumerate([("missed", "Rome: a city."), ("gold", "Paris: the capital."),
                                       ("own", "Paris: the capital.")]):
        reads.append({"id": f"q{i}:{kind}", "question_id": f"q{i}", "dataset": "hotpotqa", "side": side, "kind": kind,
                      "question": f"Q{i}?", "passages": [shown, "Other: text."], "answer": "Paris",
                      "chat": {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}})
    (folder / "reads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reads))


def reads_passages(kind, inputs):
    """Answers with the first passage's title: right where the read shows Paris."""
    return {"answer": inputs["passages"][0].split(":")[0]}


def summary_of(output: str) -> dict:
    return json.loads(output[output.index("{"):])


def test_scores_every_read_by_kind_and_a_rerun_asks_nothing(tmp_path, monkeypatch):
    write_set(tmp_path / "set")
    lm, engine = scripted_lm(reads_passages)
    use_lm(monkeypatch, lm)
    out = tmp_path / "scores.jsonl"
    result = run_cli("train", "score", "rta", "--set", str(tmp_path / "set"), "--out", str(out))
    assert result.exit_code == 0, result.output
    summary = summary_of(result.output)
    assert summary["all"] == {"n": 3, "em": 66.7, "f1": 66.7, "failed": 0}
    assert summary["kind:missed"]["em"] == 0.0 and summary["kind:gold"]["em"] == 100.0
    assert [c.inputs["passages"] for c in engine.calls][0] == ["Rome: a city.", "Other: text."]  # as the set wrote it
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["prediction"], r["em"]) for r in records] == [
        ("q0:missed", "Rome", 0.0), ("q1:gold", "Paris", 1.0), ("q2:own", "Paris", 1.0)]
    again = run_cli("train", "score", "rta", "--set", str(tmp_path / "set"), "--out", str(out))
    assert again.exit_code == 0 and len(engine.calls) == 3  # resumed: nothing asked again
    only = run_cli("train", "score", "rta", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "m.jsonl"),
                   "--kind", "missed")
    assert summary_of(only.output)["all"]["n"] == 1


def test_a_compiled_readers_adapter_answers_and_an_endpoint_is_refused(base, engines, tmp_path):
    write_set(tmp_path / "set")
    path = compiled_with_adapter(tmp_path / "compiled", "rta")
    refused = run_cli("train", "score", str(path), "--set", str(tmp_path / "set"), "--out", str(tmp_path / "x.jsonl"),
                      "--lm", "openai/gpt-4o-mini")
    assert refused.exit_code == 1 and "run it with --lm local" in refused.output
    result = run_cli("train", "score", str(path), "--set", str(tmp_path / "set"), "--out", str(tmp_path / "s.jsonl"))
    assert result.exit_code == 0, result.output
    assert len(engines[loaded_adapter(tmp_path / "compiled" / "adapter.gguf")].llama.calls) == 3  # every read
    assert summary_of(result.output)["all"]["em"] == 100.0  # the fake adapter engine answers "Paris"


def test_no_read_of_the_kinds_asked_for_and_an_unknown_kind_are_one_line(tmp_path):
    write_set(tmp_path / "set", side="train")
    none = run_cli("train", "score", "rta", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "s.jsonl"))
    assert none.exit_code == 1 and "no validation read" in none.output
    bad = run_cli("train", "score", "rta", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "s.jsonl"),
                  "--kind", "oracle")
    assert bad.exit_code == 2 and "unknown kind" in bad.output


def test_a_read_with_the_readers_own_inputs_is_answered_with_them(tmp_path, monkeypatch):
    """ToR's sets (`train tor-reads`) write the fusion reader's inputs, not rta's passages."""
    write_set(tmp_path / "set")
    rows = [json.loads(line) for line in (tmp_path / "set" / "reads.jsonl").read_text().splitlines()]
    for row in rows:
        row["inputs"] = {"passages": ["Paris: given as the reader's own input."]}
        del row["passages"]
    (tmp_path / "set" / "reads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lm, engine = scripted_lm(reads_passages)
    use_lm(monkeypatch, lm)
    result = run_cli("train", "score", "rta", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "s.jsonl"))
    assert result.exit_code == 0, result.output
    assert summary_of(result.output)["all"]["em"] == 100.0
    assert {tuple(c.inputs["passages"]) for c in engine.calls} == {("Paris: given as the reader's own input.",)}


def test_the_summary_splits_yes_no_reads_and_says_what_the_reader_answered():
    from treeqa.train.scores import summarise

    def rec(gold, prediction):
        return {"kind": "own", "dataset": "hotpotqa", "gold": gold, "prediction": prediction,
                "em": float(gold.lower() == prediction.lower()), "f1": 0.0, "failures": []}

    summary = summarise([rec("yes", "No"), rec("no", "no"), rec("Yes", "no."), rec("Paris", "Paris")])
    assert summary["answer:yes/no"]["n"] == 3 and summary["answer:yes/no"]["em"] == 33.3
    assert summary["answer:yes/no"]["said"] == {"yes": 0, "no": 3, "other": 0}
    assert summary["answer:other"] == {"n": 1, "em": 100.0, "f1": 0.0, "failed": 0}


def test_an_endpoint_is_named_as_every_lm_command_names_it(base, tmp_path, monkeypatch):
    """`--api-base` and `--api-key` reach the LM; a compiled reader with an adapter on an endpoint
    needs `--reader-model`, the name the server serves the adapter under (one clear line)."""
    write_set(tmp_path / "set")
    lm, _ = scripted_lm(reads_passages)
    asked = []
    real_get_lm = treeqa.lm.get_lm
    monkeypatch.setattr("treeqa.lm.get_lm", lambda name, **kw: asked.append((name, kw)) or lm)
    done = run_cli("train", "score", "rta", "--set", str(tmp_path / "set"), "--out", str(tmp_path / "a.jsonl"),
                   "--lm", "openai/qwen", "--api-base", "http://127.0.0.1:9/v1", "--api-key", "k")
    assert done.exit_code == 0, done.output
    assert asked[0][0] == "openai/qwen" and asked[0][1]["api_base"] == "http://127.0.0.1:9/v1"
    assert asked[0][1]["api_key"] == "k"
    monkeypatch.setattr("treeqa.lm.get_lm", real_get_lm)  # an endpoint's LM, which the adapter cannot run on
    compiled = compiled_with_adapter(tmp_path / "run", program="rta")
    refused = run_cli("train", "score", str(compiled), "--set", str(tmp_path / "set"), "--out",
                      str(tmp_path / "b.jsonl"), "--lm", "openai/qwen", "--api-base", "http://127.0.0.1:9/v1")
    assert refused.exit_code == 1 and "--reader-model" in refused.output
