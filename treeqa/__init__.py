"""treeqa: question answering by search (ALLIES beam search, Tree of Reviews) as DSPy programs.

Importing the package makes DSPy and LiteLLM offline and quiet before either is imported:
LiteLLM reads its cost map locally and DSPy caches under treeqa's cache dir.
"""

import os as _os

from treeqa.settings import get_settings as _get_settings

_settings = _get_settings()
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
_os.environ.setdefault("DSPY_CACHEDIR", str(_settings.dspy_cache_dir))
if not _settings.allow_hub:
    _os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
_os.environ.setdefault("HF_DATASETS_CACHE", str(_settings.hf_cache_dir / "datasets"))
_os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

__version__ = "0.1.0"

# the program classes, loaded on first use: `import treeqa` stays light (no DSPy, no torch)
_PROGRAM_CLASSES = ("QAProgram", "BeamSearchQA", "TreeOfReviews", "ChainOfReviews", "RetrieveThenAnswer",
                    "DirectAnswer", "ChainOfThoughtAnswer", "GenRead", "Hop", "IRCoT", "IterRetGen", "ReActSearch",
                    "SelfAsk")


def configure(lm: str = "local", *, api_base: str | None = None, api_key: str | None = None, cache: bool = True,
              adapter=None, **kwargs):
    """Set up the LM every treeqa program (and DSPy) uses, with the DSPy adapter that suits it: the
    one way to do it, the way the command line does.

    Args:
        lm: "local" (the embedded model, in-process) or a DSPy model string ("openai/gpt-4o-mini").
        api_base: the base URL of an OpenAI-compatible server (vLLM, llama.cpp's server, a provider).
        api_key: the endpoint's key; by default TREEQA_API_KEY, then the provider's own variable.
        cache: use DSPy's response cache.
        adapter: a LoRA adapter (GGUF) for the embedded model.

    Returns:
        the `dspy.LM`, also set as DSPy's default.

    Example:
        >>> import treeqa
        >>> treeqa.configure("local")
        >>> program = treeqa.load_program("benchmarks/runs/lora-reader-rta/compiled-hotpotqa.json")
        >>> program(question="Which city is the birthplace of the director of Jaws?").answer
    """
    # late: `import treeqa` stays light (no DSPy): the LM door loads when an LM is configured
    from treeqa.lm import configure as _configure

    return _configure(lm, api_base=api_base, api_key=api_key, cache=cache, adapter=adapter, **kwargs)


def load_program(path, retriever=None, overrides=None, expect=None, reader_model=None):
    """A ready compiled program from a file `treeqa optimize` wrote: its demos, instructions,
    settings, LoRA adapter and the index of the corpus it was compiled on (see `treeqa.programs.compiled`).

    Args:
        path: the compiled program's JSON file.
        retriever: a retriever to search with instead of the compiled one's (`get_retriever`).
        overrides: settings to run with in place of the stored ones, e.g. `{"pick": "vote"}`.
        expect: the program name the caller wants ("tor", "beam", ...): another is an error.
        reader_model: for a file with a LoRA reader when the LM configured before this call is an
            endpoint: the model name that endpoint serves the adapter under (without it such a
            load is an error, not a program that mixes the endpoint with a local reader).

    Example:
        >>> treeqa.load_program("runs/optimize/hotpotqa-tor-path-judge-1234abcd/compiled.json", expect="tor")
    """
    # late: reading a compiled file brings DSPy and the programs; `import treeqa` stays light
    from treeqa.programs.compiled import load_program as _load

    return _load(path, retriever=retriever, expect=expect, overrides=overrides, reader_model=reader_model)


def get_retriever(*, dataset: str | None = None, corpus: str | None = None, kind: str = "dense",
                  build: bool = True):
    """The retriever over a benchmark's pooled corpus (`dataset`) or your own registered corpus
    (`corpus`, a name from `treeqa index build --corpus-file FILE --name NAME`): exactly one of them.

    Args:
        dataset: "hotpotqa", "2wikimultihopqa", "musique", "nq", "triviaqa" or "webq".
        corpus: the name of a corpus of your own.
        kind: "dense" (faiss over all-MiniLM-L6-v2) or "bm25".
        build: build a missing index (False: a missing one raises `IndexMissingError`).

    Example:
        >>> retriever = treeqa.get_retriever(corpus="mydocs")
        >>> [p.title for p in retriever("Who directed Jaws?", k=3)]
    """
    # late: `import treeqa` stays light, and tests replace treeqa.retrievers.get_retriever
    from treeqa.retrievers import get_retriever as _get

    if (dataset is None) == (corpus is None):
        raise ValueError("name exactly one of dataset= (a benchmark's corpus) or corpus= (your own)")
    return _get(dataset or "", kind, build=build, corpus=corpus)


def build_program(name: str, retriever=None, preset: str | None = None, **settings):
    """A fresh, zero-shot program by its registered name (see `list_programs()`), e.g.
    `treeqa.build_program("tor", treeqa.get_retriever(dataset="hotpotqa"), max_depth=2)`."""
    # late: the programs (and DSPy) load on first use, so `import treeqa` stays light
    from treeqa.programs import build_program as _build

    return _build(name, retriever, preset=preset, **settings)


def list_programs() -> dict[str, str]:
    """Every registered program (yours too, `TREEQA_PROGRAMS`), name -> the first paragraph of its
    class's description."""
    # late: listing the programs imports every one of them, with DSPy; `import treeqa` does not
    from treeqa.programs import PROGRAMS

    return {name: " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split()) for name, cls in PROGRAMS.items()}


def __getattr__(name: str):
    if name in _PROGRAM_CLASSES:
        # late: the program classes load on first access (PEP 562), keeping `import treeqa` light
        from treeqa.programs import PROGRAMS, QAProgram

        classes = {cls.__name__: cls for cls in PROGRAMS.values()} | {"QAProgram": QAProgram}
        if name in classes:
            return classes[name]
    raise AttributeError(f"module 'treeqa' has no attribute {name!r}")


__all__ = ["__version__", "build_program", "configure", "get_retriever", "list_programs", "load_program",
           *_PROGRAM_CLASSES]
