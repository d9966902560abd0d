"""ToR's fusion reader's training reads (`treeqa.train.tor_reads`): built from a recorded ToR
run, in the exact prompt the compiled ToR's reader sends, with the gold paragraphs a search
missed added where the budget cannot cut them; claim questions and other programs refused."""

import json

import dspy
import pytest
from typer.testing import CliRunner

from tests.fakes import answering, review, review_kind, scripted_lm, tree_retriever, use_lm
from treeqa.cli import app
from treeqa.data import load_corpus, load_split
from treeqa.evaluation.replay import ReplayError, rebuild_run
from treeqa.programs import build_program
from treeqa.programs.compiled import save_compiled
from treeqa.programs.tree_of_reviews import TreeOfReviews
from treeqa.train.reads import read_set
from treeqa.train.tor_reads import build_tor_reads, tor_reads_of


def accept_some(call):
    last = int(call.titles[-1][1:])
    return review("accept", analysis=f"enough in {'/'.join(call.titles)}") if last % 2 else review("reject")


@pytest.fixture
def recorded(fixture_data, tmp_path, monkeypatch):
    """A ToR run over HotpotQA's 2 train questions (fake paragraphs N1, N2, ...), its compiled
    file, and the searcher, which afterwards also holds the corpus (where the gold paragraphs are)."""
    searcher = tree_retriever()
    monkeypatch.setattr("treeqa.retrievers.get_retriever", lambda dataset, kind, corpus=None: searcher)
    monkeypatch.setattr("treeqa.train.tor_reads.claim_keys", lambda: (set(), set()))
    lm, engine = scripted_lm(answering(accept_some, answer="Paris"), classify=review_kind, whole_call=True)
    use_lm(monkeypatch, lm)
    program = TreeOfReviews(retriever=tree_retriever(), widths=(3, 2), max_context_chars=900)
    program.fuse.demos = [dspy.Example(question="q", evidence=["e"], answer="a")]
    compiled = save_compiled(program, tmp_path / "tor.json", name="tor", dataset="hotpotqa", retriever="dense")
    result = CliRunner().invoke(app, ["evaluate", "--compiled", str(compiled), "--split", "train", "--n", "2",
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    made = {p.id: p for ps in searcher._made.values() for p in ps}
    searcher.passages = list(made.values()) + load_corpus("hotpotqa")
    return compiled, tmp_path / "run", searcher


def test_a_read_is_the_prompt_the_reader_sends_and_the_missed_gold_is_added(recorded, tmp_path):
    compiled, run_dir, searcher = recorded
    built, reader, settings = build_tor_reads([run_dir], compiled, partial_share=1.0, validation_share=0.0)
    assert built.counts["questions"] == 2 and settings["reader"] == "tor.fuse"
    # the fake paragraphs are never gold: each question gets its search as it is and with the gold added
    assert sorted(r["kind"] for r in built.train) == ["gold", "gold", "partial", "partial"]
    examples = {ex.question: ex for ex in load_split("hotpotqa", "train")}
    by_id = {p.id: p for p in searcher.passages}
    trees = {json.loads(line)["question"]: json.loads(line)["tree"]
             for line in (run_dir / "predictions.jsonl").read_text().splitlines()}
    program = TreeOfReviews(retriever=searcher, widths=(3, 2), max_context_chars=900)
    program.fuse.demos = [dspy.Example(question="q", evidence=["e"], answer="a")]
    for r in built.train:
        ex = examples[r["question"]]
        assert r["answer"] == ex.answers[0]
        shown = "\n".join(r["inputs"]["evidence"])
        gold_titles = {by_id[i].title for i in ex.gold_ids}
        if r["kind"] == "gold":
            assert all(f"- {title}:" in shown for title in gold_titles)  # within the budget
        else:  # what the reader was given (the reader's one call passes `fuse_inputs` of `reading`)
            assert not any(f"- {title}:" in shown for title in gold_titles) and "- N" in shown
            assert r["inputs"] == program.fuse_inputs(r["question"], program.reading(
                rebuild_run(trees[r["question"]], by_id))[0])


def test_the_written_set_trains_as_rtas_does_and_holds_the_readers_prompt(recorded, tmp_path):
    compiled, run_dir, _ = recorded
    result = CliRunner().invoke(app, ["train", "tor-reads", "--compiled", str(compiled), "--run", str(run_dir),
                                      "--out", str(tmp_path / "set"), "--validation-share", "0"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "set" / "manifest.json").read_text())
    assert json.loads(result.output)["reads_sha256"] == manifest["reads_sha256"]
    reads = read_set(tmp_path / "set", "train", per_question=1)
    assert len(reads) == 2 and all(r["kind"] == "gold" for r in reads)  # gold preferred, one a question
    messages = reads[0]["chat"]["messages"]
    assert "evidence" in messages[0]["content"] and messages[-1]["role"] == "assistant"
    assert json.loads(messages[-1]["content"]) == {"answer": reads[0]["answer"]}
    assert len(messages) == 1 + 2 + 2  # system, the one demo (asked, answered), the read and its target


def test_own_read_where_the_search_already_shows_the_gold(recorded):
    compiled, run_dir, searcher = recorded
    tree = json.loads((run_dir / "predictions.jsonl").read_text().splitlines()[0])["tree"]
    by_id = {p.id: p for p in searcher.passages}
    program = TreeOfReviews(retriever=searcher, widths=(3, 2), max_context_chars=900)
    run = rebuild_run(tree, by_id)
    shown = program.reading(run)[0][0].passages[0]
    ex = dspy.Example(id="x", question=tree["question"], answers=["a"], gold_ids=[shown.id])
    assert [kind for kind, _ in tor_reads_of(program, run, ex, by_id, seed=0, partial_share=1.0)] == ["own"]
    assert tor_reads_of(program, run, ex.copy(answers=[]), by_id, seed=0, partial_share=1.0) == []


def test_claim_questions_and_other_programs_are_refused(recorded, tmp_path, monkeypatch):
    compiled, run_dir, searcher = recorded
    first = load_split("hotpotqa", "train")[0]
    monkeypatch.setattr("treeqa.train.tor_reads.claim_keys", lambda: ({first.id}, set()))
    with pytest.raises(ValueError, match="claim sample"):
        build_tor_reads([run_dir], compiled)
    rta = save_compiled(build_program("rta", searcher), tmp_path / "rta.json", name="rta", dataset="hotpotqa",
                        retriever="dense")
    result = CliRunner().invoke(app, ["train", "tor-reads", "--compiled", str(rta), "--run", str(run_dir),
                                      "--out", str(tmp_path / "set")])
    assert result.exit_code == 1 and "ToR reads are for a compiled ToR" in result.output
    assert not (tmp_path / "set").exists()
    with pytest.raises(ReplayError, match="not ToR's searches of musique"):
        other = save_compiled(TreeOfReviews(retriever=searcher, widths=(3, 2)), tmp_path / "m.json", name="tor",
                              dataset="musique", retriever="dense")
        build_tor_reads([run_dir], other)
