"""The public API: what `import treeqa` offers an app, and that it means what the command line does."""

import subprocess
import sys

import dspy
import pytest

import treeqa
import treeqa.lm
from tests.fakes import FakeEndpoint, tree_retriever
from treeqa.programs.compiled import save_compiled


def test_import_treeqa_stays_light_and_exports_the_api():
    code = ("import sys, treeqa; print(sorted(m for m in ('dspy', 'torch', 'llama_cpp', 'faiss') if m in sys.modules));"
            "print(treeqa.TreeOfReviews.__name__, treeqa.BeamSearchQA.__name__, treeqa.IRCoT.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "TreeOfReviews BeamSearchQA IRCoT"
    for name in ("configure", "load_program", "get_retriever", "build_program", "list_programs"):
        assert name in treeqa.__all__ and callable(getattr(treeqa, name)) and getattr(treeqa, name).__doc__
    with pytest.raises(AttributeError):
        treeqa.NoSuchProgram  # noqa: B018


def test_list_programs_names_every_registered_program_with_its_description():
    from treeqa.programs import PROGRAMS

    listing = treeqa.list_programs()
    assert list(listing) == list(PROGRAMS) and "Tree of Reviews" in listing["tor"] and "ALLIES" in listing["beam"]
    assert all(listing.values())


def test_configure_sets_the_lm_and_the_adapter_that_suits_it(settings_env, monkeypatch):
    monkeypatch.delenv("TREEQA_API_KEY", raising=False)
    settings_env()
    with FakeEndpoint(lambda n, body, headers: (200, "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]", 0)) as ep:
        lm = treeqa.configure("openai/m", api_base=ep.url, api_key="k", cache=False)
        assert dspy.settings.lm is lm and isinstance(lm, treeqa.lm.EndpointLM)
        assert isinstance(dspy.settings.adapter, dspy.ChatAdapter)
        assert treeqa.build_program("direct")(question="The capital of France?").answer == "Paris"
    dspy.configure(lm=None, adapter=None)


def test_load_program_passes_overrides_and_expect(tmp_path):
    path = save_compiled(treeqa.build_program("rta", tree_retriever()), tmp_path / "c.json", name="rta",
                         dataset="hotpotqa", retriever="dense")
    program = treeqa.load_program(path, retriever=tree_retriever(), overrides={"k": 2})
    assert isinstance(program, treeqa.RetrieveThenAnswer) and program.k == 2
    with pytest.raises(Exception, match="not 'tor'"):
        treeqa.load_program(path, retriever=tree_retriever(), expect="tor")
    with pytest.raises(ValueError, match="not a setting of rta"):
        treeqa.load_program(path, retriever=tree_retriever(), overrides={"no_such_setting": 1})


def test_get_retriever_takes_a_dataset_or_a_corpus_of_ones_own(monkeypatch):
    asked = []
    monkeypatch.setattr("treeqa.retrievers.get_retriever",
                        lambda dataset, kind, build=True, corpus=None: asked.append((dataset, kind, corpus)))
    treeqa.get_retriever(dataset="hotpotqa")
    treeqa.get_retriever(corpus="mydocs", kind="bm25")
    assert asked == [("hotpotqa", "dense", None), ("", "bm25", "mydocs")]
    for wrong in ({}, {"dataset": "hotpotqa", "corpus": "mydocs"}):
        with pytest.raises(ValueError, match="exactly one"):
            treeqa.get_retriever(**wrong)


def test_every_program_class_documents_its_settings_and_an_example():
    from treeqa.programs import PROGRAMS

    for name, cls in PROGRAMS.items():
        doc = cls.__doc__ or ""
        assert "Example:" in doc, name
        if cls.settings_model().model_fields:
            assert "Args:" in doc or "Settings" in doc, name
