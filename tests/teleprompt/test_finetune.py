"""Compiling the weights through DSPy's own interface: BootstrapFinetune trains a LoRA adapter
with the embedded provider (a tiny Qwen2 stands in for the 1.5B model, a scripted engine for
llama.cpp), gold reads put the gold paragraphs among rta's passages, and a compiled program
carries its adapter, refused when it is missing or changed."""

import json
import random
from pathlib import Path

import dspy
import pytest

pytest.importorskip("peft")

from tests.fakes import ScriptedEngine, passage, tiny_base_gguf, tiny_model, tiny_tokenizer  # noqa: E402
from treeqa.lm import TrainableJSONAdapter  # noqa: E402
from treeqa.lm.provider import EmbeddedLM, EmbeddedProvider  # noqa: E402
from treeqa.programs.baselines import RetrieveThenAnswer  # noqa: E402
from treeqa.programs.compiled import (  # noqa: E402
    CompiledProgramError,
    adapter_lms,
    attach_adapter,
    load_program,
    save_compiled,
)
from treeqa.signatures.answer import AnswerFromPassages  # noqa: E402
from treeqa.teleprompt.metrics import em_metric  # noqa: E402
from treeqa.train.gold_reads import gold_reads, with_gold  # noqa: E402


class CorpusRetriever:
    """Returns the same ranked passages for every query, over a known corpus."""

    def __init__(self, ranked):
        self.passages = list(ranked)
        self.queries = []

    def search(self, query, k):
        self.queries.append(query)
        return self.passages[:k]

    search_batch = None


CORPUS = [passage(f"P{i}", f"text of paragraph {i}") for i in range(8)]
QUESTIONS = {"who is one": "uno", "who is two": "dos", "who is three": "tres"}


class JSONEngine(ScriptedEngine):
    """Declares structured output as the embedded engine does, so DSPy's JSON adapter asks for it."""

    supports_response_schema = True
    supported_params = frozenset({"response_format", "temperature", "max_tokens", "stop", "logprobs"})


def answering_engine(right: set[str]):
    """Answers the questions in `right` with their gold answer, the others wrongly."""
    def respond(call):
        question = call.inputs.get("question", "")
        return {"answer": QUESTIONS[question] if question in right else "nobody"}
    return JSONEngine(respond)


@pytest.fixture
def engines(monkeypatch, settings_env, tmp_path):
    """`local_engine` returns scripted engines, one per adapter, and records what it was asked;
    the base model is the tiny model's GGUF (adapters record its hash and are checked against it)."""
    tiny_base_gguf(tmp_path / "base.gguf")  # adapters are checked against its widths
    settings_env(model_path=tmp_path / "base.gguf", cache_dir=tmp_path / "cache")
    made = {}

    def fake_local_engine(**overrides):
        adapter = overrides.get("adapter")
        if adapter not in made:
            made[adapter] = answering_engine(set(QUESTIONS))
            made[adapter].adapter = Path(adapter) if adapter else None  # as LlamaEngine keeps it
        return made[adapter]

    monkeypatch.setattr("treeqa.lm.local_engine", fake_local_engine)
    return made


def trainset():
    return [dspy.Example(id=str(i), question=q, answers=[a], gold_ids=[CORPUS[6].id]).with_inputs("question")
            for i, (q, a) in enumerate(QUESTIONS.items())]


def test_trainable_json_adapter_writes_the_reply_it_parses():
    adapter = TrainableJSONAdapter()
    data = adapter.format_finetune_data(AnswerFromPassages, [], {"question": "q?", "passages": ["A: x"]},
                                        {"answer": "Paris"})
    roles = [m["role"] for m in data["messages"]]
    assert roles == ["system", "user", "assistant"]
    assert data["messages"][:2] == adapter.format(AnswerFromPassages, [], {"question": "q?", "passages": ["A: x"]})
    assert adapter.parse(AnswerFromPassages, data["messages"][-1]["content"]) == {"answer": "Paris"}


def test_bootstrap_finetune_trains_an_adapter_through_the_embedded_provider(engines, tmp_path):
    """DSPy's BootstrapFinetune, unchanged: the traces that pass EM become the training data, the
    provider trains a LoRA adapter and the predictor answers through an engine that loads it."""
    lm = EmbeddedLM("local/scripted", engine=answering_engine({"who is one", "who is three"}), cache=False,
                    num_retries=0, provider=EmbeddedProvider())
    program = RetrieveThenAnswer(CorpusRetriever(CORPUS), k=2)
    program.set_lm(lm)
    base = (tiny_tokenizer(), tiny_model())
    optimizer = dspy.BootstrapFinetune(metric=em_metric, num_threads=1, train_kwargs={
        "out_dir": str(tmp_path / "ft"), "base": base, "progress": False,
        "recipe": {"rank": 4, "alpha": 8, "top_layers": 1, "max_tokens": 4096}})
    with dspy.context(adapter=TrainableJSONAdapter()):
        compiled = optimizer.compile(program, trainset=trainset())
    record = json.loads((tmp_path / "ft" / "training.json").read_text())
    assert record["train_data"]["chats"] == 2  # the two questions answered right
    chats = [json.loads(line) for line in (tmp_path / "ft" / "train-data.jsonl").read_text().splitlines()]
    assert {json.loads(c["messages"][-1]["content"])["answer"] for c in chats} == {"uno", "tres"}
    assert record["report"]["steps_done"] == 2 and record["adapter"]["bytes"] > 0
    finetuned = compiled.answer.lm
    assert isinstance(finetuned, EmbeddedLM) and "+lora-" in finetuned.model
    adapter = str((tmp_path / "ft" / "adapter.gguf").resolve())
    assert finetuned._engine_spec is engines[adapter]
    assert compiled(question="who is two").answer == "dos"  # served by the adapter's engine
    assert engines[adapter].calls


def test_gold_reads_put_every_gold_paragraph_among_the_k():
    ranked = [passage(f"R{i}") for i in range(5)]
    gold = [passage("G1"), ranked[3]]
    read = with_gold(ranked, gold, 4, random.Random(0))
    ids = [p.id for p in read]
    assert len(read) == 4 and gold[0].id in ids and ranked[3].id in ids
    assert ids.index(ranked[0].id) < ids.index(ranked[1].id)  # the retrieval's order kept
    assert with_gold(ranked, [], 3, random.Random(0)) == ranked[:3]

    program = RetrieveThenAnswer(CorpusRetriever(CORPUS), k=3)
    examples = [*trainset(), dspy.Example(id="x", question="q", answers=["a"], gold_ids=["nowhere"])]
    chats, skipped = gold_reads(program, examples, TrainableJSONAdapter())
    assert skipped == 1 and len(chats) == 3
    user = chats[0]["messages"][1]["content"]
    assert CORPUS[6].as_text() in user and CORPUS[0].as_text() in user and CORPUS[2].as_text() not in user
    assert json.loads(chats[0]["messages"][-1]["content"]) == {"answer": "uno"}


def test_a_compiled_program_carries_its_adapter(engines, tmp_path):
    from treeqa.lm.adapter import write_adapter
    from treeqa.lm.lora import LoraRecipe, LoraTrainer

    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(rank=4, alpha=8, top_layers=1), "t", tmp_path)
    adapter = write_adapter(trainer.lora_state(), tmp_path / "trained" / "adapter.gguf", alpha=8)
    program = RetrieveThenAnswer(CorpusRetriever(CORPUS), k=2)
    attach_adapter(program, adapter, ["answer"])
    path = save_compiled(program, tmp_path / "run" / "compiled.json", name="rta", dataset="hotpotqa",
                         retriever="dense")
    recipe = json.loads(path.read_text())["treeqa"]
    assert recipe["adapter"]["predictors"] == ["answer"]
    assert (path.parent / recipe["adapter"]["file"]).is_file()  # copied beside the compiled file
    assert "lm" not in json.dumps(json.loads(path.read_text())["answer"]) or \
        json.loads(path.read_text())["answer"].get("lm") is None

    loaded = load_program(path, retriever=CorpusRetriever(CORPUS))
    assert set(adapter_lms(loaded)) == {"answer"}
    assert loaded(question="who is one").answer == "uno"

    copied = path.parent / recipe["adapter"]["file"]
    copied.write_bytes(copied.read_bytes()[:-1] + bytes([copied.read_bytes()[-1] ^ 1]))
    with pytest.raises(CompiledProgramError, match="changed since it was trained"):
        load_program(path, retriever=CorpusRetriever(CORPUS))
    copied.unlink()
    with pytest.raises(CompiledProgramError, match="missing"):
        load_program(path, retriever=CorpusRetriever(CORPUS))


def test_finetune_compiler_adds_gold_reads_to_the_passing_traces(engines, tmp_path, monkeypatch):
    """`--optimizer finetune`: the traces rta answers right and a gold read of every train
    question are the training data; what was trained on is recorded as the compile's fit."""
    from treeqa.teleprompt.finetune import Finetune

    monkeypatch.setattr("treeqa.lm.provider.load_base", lambda *a: (tiny_tokenizer(), tiny_model()))
    lm = EmbeddedLM("local/scripted", engine=answering_engine({"who is one"}), cache=False, num_retries=0,
                    provider=EmbeddedProvider())
    program = RetrieveThenAnswer(CorpusRetriever(CORPUS), k=2)
    optimizer = Finetune(em_metric, out_dir=tmp_path, recipe={"rank": 4, "alpha": 8, "top_layers": 1,
                                                              "max_tokens": 4096})
    with dspy.context(lm=lm, adapter=TrainableJSONAdapter()):
        compiled = optimizer.compile(program, trainset=trainset())
    fit = compiled.finetune_fit
    assert fit["gold_reads"] == 3 and fit["traces"] == 1 and fit["chats"] == 4
    assert fit["report"]["steps_done"] == 4
    assert "+lora-" in compiled.answer.lm.model  # BootstrapFinetune compiles its student in place


def test_finetune_refuses_an_endpoint():
    from treeqa.teleprompt.finetune import Finetune

    lm = dspy.LM("openai/gpt-4o-mini", api_key="k")
    with dspy.context(lm=lm), pytest.raises(ValueError, match="--lm local"):
        Finetune(em_metric).compile(RetrieveThenAnswer(CorpusRetriever(CORPUS)), trainset=trainset())


def test_plan_prices_the_weight_training(tmp_path):
    from treeqa.optimize import OptimizeSpec, run_optimize
    from treeqa.teleprompt.finetune import SECONDS_PER_EXAMPLE

    plan = run_optimize(OptimizeSpec(program="rta", optimizer="finetune", train=50, dev=10), tmp_path,
                        plan_only=True, echo=lambda *a: None)["plan"]
    assert plan["compile_max"] == 50  # one traced run of rta a train question
    assert plan["training_seconds_est"] == round(100 * SECONDS_PER_EXAMPLE)  # traces and gold reads
    bare = run_optimize(OptimizeSpec(program="rta", optimizer="bootstrap", train=50, dev=10), tmp_path,
                        plan_only=True, echo=lambda *a: None)["plan"]
    assert "training_seconds_est" not in bare


def test_dspys_own_load_attaches_and_checks_the_adapter(engines, tmp_path):
    from treeqa.lm.adapter import AdapterError, write_adapter
    from treeqa.lm.lora import LoraRecipe, LoraTrainer

    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(rank=4, alpha=8, top_layers=1), "t", tmp_path)
    adapter = write_adapter(trainer.lora_state(), tmp_path / "adapter.gguf", alpha=8)
    program = RetrieveThenAnswer(CorpusRetriever(CORPUS), k=2)
    attach_adapter(program, adapter, ["answer"])
    path = save_compiled(program, tmp_path / "run" / "compiled.json", name="rta", dataset="hotpotqa",
                         retriever="dense")
    fresh = RetrieveThenAnswer(CorpusRetriever(CORPUS), k=2)
    fresh.load(str(path))  # DSPy's Module.load
    assert set(adapter_lms(fresh)) == {"answer"}
    next((path.parent).glob("adapter-*.gguf")).unlink()
    with pytest.raises(AdapterError, match="missing"):
        RetrieveThenAnswer(CorpusRetriever(CORPUS), k=2).load(str(path))


def test_better_together_runs_prompts_weights_prompts(engines, tmp_path, monkeypatch):
    from treeqa.optimize import OptimizeSpec
    from treeqa.teleprompt.base import CompileContext
    from treeqa.teleprompt.finetune import _better_together

    monkeypatch.setattr("treeqa.lm.provider.load_base", lambda *a: (tiny_tokenizer(), tiny_model()))
    monkeypatch.setattr("treeqa.teleprompt.finetune.DEFAULT_RECIPE",
                        {"rank": 4, "alpha": 8, "top_layers": 1, "max_tokens": 4096})
    lm = EmbeddedLM("local/scripted", engine=answering_engine({"who is one", "who is two"}), cache=False,
                    num_retries=0, provider=EmbeddedProvider())
    spec = OptimizeSpec(program="rta", optimizer="better-together", train=3, candidates=1, max_demos=1)
    teleprompter, kwargs = _better_together(CompileContext(spec, lm, out_dir=tmp_path))
    program = RetrieveThenAnswer(CorpusRetriever(CORPUS), k=2)
    program.set_lm(lm)
    with dspy.context(lm=lm, adapter=TrainableJSONAdapter()):
        compiled = teleprompter.compile(program, trainset=trainset() * 4, valset_ratio=0, **kwargs)
    assert (tmp_path / "finetune" / "adapter.gguf").is_file()  # the w step trained an adapter
    assert "+lora-" in compiled.answer.lm.model


def test_balancing_yes_no_leaves_out_the_surplus_of_the_more_frequent_answer_seeded():
    from treeqa.train.gold_reads import balance_yes_no

    def chat(answer, n):
        return {"messages": [{"role": "user", "content": f"q{n}"},
                             {"role": "assistant", "content": json.dumps({"answer": answer})}]}

    chats = [chat(a, n) for n, a in enumerate(["No", "no", "yes", "Paris", "no", "NO", "Yes", "1692"])]
    kept, dropped = balance_yes_no(chats, seed=0)
    answers = [json.loads(c["messages"][-1]["content"])["answer"] for c in kept]
    assert dropped == 2 and len(kept) == 6
    assert sorted(a.lower() for a in answers if a.lower() in ("yes", "no")) == ["no", "no", "yes", "yes"]
    assert "Paris" in answers and "1692" in answers
    assert [c["messages"][0]["content"] for c in kept] == sorted((c["messages"][0]["content"] for c in kept),
                                                                   key=lambda q: int(q[1:]))  # order kept
    assert balance_yes_no(chats, seed=0) == (kept, 2)  # the same reads left out each time
    assert balance_yes_no([chat("yes", 0), chat("no", 1)], seed=0) == ([chat("yes", 0), chat("no", 1)], 0)


def test_the_default_recipe_takes_bfloat16_only_where_the_cpu_computes_it(monkeypatch):
    from treeqa.lm.lora import native_bf16
    from treeqa.teleprompt.finetune import DEFAULT_RECIPE, Finetune

    assert native_bf16("processor : 0\nflags : fpu avx2 avx512f avx512_bf16\n")
    assert native_bf16("flags : fpu amx_bf16 amx_tile\n")
    assert not native_bf16("flags : fpu avx2 avx512f\n") and not native_bf16("")
    monkeypatch.setattr("treeqa.teleprompt.finetune.native_bf16", lambda: True)
    fast = Finetune(metric=None).recipe
    assert fast == {**DEFAULT_RECIPE, "lower_dtype": "bfloat16", "top_dtype": "bfloat16"}
    monkeypatch.setattr("treeqa.teleprompt.finetune.native_bf16", lambda: False)
    assert Finetune(metric=None).recipe == DEFAULT_RECIPE
    assert Finetune(metric=None, recipe={"rank": 4}).recipe == {"rank": 4}  # a given recipe is taken as it is


def test_a_judged_tor_compiled_better_together_is_one_file_with_judge_demos_and_adapter(engines, train, tmp_path,
                                                                                         monkeypatch):
    """`optimize --program tor --optimizer path-judge+better-together`'s compile, stage by stage as
    `compile_program` runs it: the judge fitted from the annotations, demos, the adapter trained
    on ToR's own passing traces, demos again; one compiled file restores all three."""
    from tests.fakes import FakeRetriever, review_kind
    from treeqa.judging.path_judge import PathJudge
    from treeqa.optimize import OptimizeSpec
    from treeqa.optimize.run import Checked, compile_program

    hotpot, _ = train
    gold = {ex.question: ex.answers[0] for ex in hotpot}

    def script(call):  # the query writer names a second hop; the reader is right on the first question,
        if call.kind == "complete":  # and on the others only when shown a demo: demos pay
            return {"missing_paragraph": "the second paragraph"}
        assert call.kind == "fuse", call.kind
        question = call.inputs.get("question", "")
        right = question == hotpot[0].question or len(call.messages) > 2
        return {"answer": gold.get(question, "nobody") if right else "nobody"}

    def engine_for(adapter=None):  # one engine an adapter, answering alike, keeping its adapter as LlamaEngine does
        engine = JSONEngine(script, classify=review_kind)
        engine.adapter = Path(adapter) if adapter else None
        return engine

    monkeypatch.setattr("treeqa.lm.local_engine", lambda **o: engine_for(o.get("adapter")))
    engine = engine_for()
    monkeypatch.setattr("treeqa.lm.provider.load_base", lambda *a: (tiny_tokenizer(), tiny_model()))
    monkeypatch.setattr("treeqa.teleprompt.finetune.DEFAULT_RECIPE",
                        {"rank": 4, "alpha": 8, "top_layers": 1, "max_tokens": 4096})
    lm = EmbeddedLM("local/scripted", engine=engine, cache=False, num_retries=0, provider=EmbeddedProvider())
    spec = OptimizeSpec(program="tor", optimizer="path-judge+better-together", train=len(hotpot), candidates=1,
                        max_demos=1, params={"fusion": "passages"})
    checked = Checked(tmp_path, spec.eval_spec(), "hotpotqa", {"train": "train", "dev": "dev"}, hotpot * 2,  # twice
                      hotpot * 2, None, FakeRetriever(), spec.resolved.build(FakeRetriever()))
    compiled, info = compile_program(spec, checked, lm, echo=lambda *a: None)
    assert (tmp_path / "finetune" / "adapter.gguf").is_file()  # the w step trained on ToR's traces
    assert "forward" not in vars(compiled)  # DSPy's tracing left none pinned to another copy
    chats = (tmp_path / "finetune" / "train-data.jsonl").read_text().splitlines()
    assert chats and all(json.loads(c)["messages"][-1]["role"] == "assistant" for c in chats)
    path = tmp_path / "compiled.json"  # saved by compile_program, as optimize saves it
    recipe = json.loads(path.read_text())["treeqa"]
    assert info["judge_fit"]["cases"] == 2 * 32 and recipe["compile"]["optimizer"] == spec.optimizer
    assert info["finetune_fit"]["adapter"] and info["together_fit"]["chosen"] == "p -> w -> p"  # no held-out share
    assert info["together_fit"]["held_out"] == 0
    assert recipe["settings"]["path_judge"] and recipe["adapter"]["predictors"]
    loaded = load_program(path, retriever=FakeRetriever())
    assert PathJudge.model_validate(loaded.path_judge) == PathJudge.model_validate(compiled.path_judge)
    assert set(adapter_lms(loaded)) == set(recipe["adapter"]["predictors"])
    assert {n: len(p.demos) for n, p in loaded.named_predictors()} == \
        {n: len(p.demos) for n, p in compiled.named_predictors()}
    assert any(p.demos for _, p in loaded.named_predictors())  # the last p step's demos


def test_better_together_refuses_an_endpoint_first_and_fails_when_a_step_fails(engines, tmp_path, monkeypatch):
    from tests.fakes import scripted_lm
    from treeqa.optimize import OptimizeSpec
    from treeqa.teleprompt.base import CompileContext
    from treeqa.teleprompt.finetune import Finetune, _better_together

    spec = OptimizeSpec(program="rta", optimizer="better-together", train=3, candidates=1, max_demos=1)
    endpoint, calls = scripted_lm(lambda kind, inputs: {"answer": "x"})
    teleprompter, kwargs = _better_together(CompileContext(spec, endpoint, out_dir=tmp_path))
    with dspy.context(lm=endpoint), pytest.raises(ValueError, match="better-together trains a LoRA adapter"):
        teleprompter.compile(RetrieveThenAnswer(CorpusRetriever(CORPUS), k=2), trainset=trainset(), **kwargs)
    assert calls.calls == []  # refused before the prompt step asked anything

    def broken(self, student, trainset, teacher=None, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(Finetune, "compile", broken)
    lm = EmbeddedLM("local/scripted", engine=answering_engine(set(QUESTIONS)), cache=False, num_retries=0,
                    provider=EmbeddedProvider())
    teleprompter, kwargs = _better_together(CompileContext(spec, lm, out_dir=tmp_path))
    with dspy.context(lm=lm, adapter=TrainableJSONAdapter()), pytest.raises(RuntimeError, match="a step failed"):
        teleprompter.compile(RetrieveThenAnswer(CorpusRetriever(CORPUS), k=2), trainset=trainset() * 4,
                             valset_ratio=0, **kwargs)


def test_better_together_chooses_a_step_only_on_enough_held_out_questions(caplog):
    from treeqa.teleprompt.finetune import MIN_HELD_OUT, _held_out_share

    few = {"trainset": list(range(20))}  # DSPy's 0.1 would choose on 2 questions, a tie to the untouched program
    with caplog.at_level("WARNING"):
        assert _held_out_share(few) == 0
    assert few["valset_ratio"] == 0 and "the program of the last step is kept" in caplog.text
    enough = {"trainset": list(range(10 * MIN_HELD_OUT))}
    assert _held_out_share(enough) == MIN_HELD_OUT and "valset_ratio" not in enough  # DSPy's default stays
    assert _held_out_share({"trainset": list(range(20)), "valset": [1, 2, 3]}) == 3  # a given valset is used
    assert _held_out_share({"trainset": list(range(20)), "valset_ratio": 0}) == 0
