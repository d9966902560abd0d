"""The test doubles and shared test data: the one package a test module imports helpers from
(fixtures live in `tests/conftest.py`; no test module imports another). By kind:

    lm.py          scripted LMs and engines: `ScriptedEngine` behind a real `dspy.LM` (`scripted_lm`,
                   `run_scripted`, `Raw`), `generic_responder` / `generic_lm` for any signature,
                   `use_lm`, and `FakeLlama` standing in for llama_cpp.Llama
    retrievers.py  `FakeRetriever` (and `passage`), and the stand-in encoder `hashing_embed`
    scripts.py     the Tree/Chain of Reviews' scripts (`review`, `answering`, `run`, `Q`,
                   `tree_retriever`) and the beam search's (`BeamScript`)
    servers.py     on 127.0.0.1: `FakeEndpoint`, `simulated_endpoint`, `local_client`, `Overlap`,
                   and llama.cpp's real server (`llama_server`, integration tests)
    data.py        where the data lies (`FIXTURE_DATA`, `SHARED_DATA`, `requires_shared_data`), what
                   the scripted LM answers the fixture questions (`FIXTURE_ANSWERS`), and the
                   annotated training records (`RECORDS`, `MUSIQUE`)
    cli.py         `run_cli`: the `treeqa` command run in this process; `benchmark_script`: a
                   script of benchmarks/ loaded as a module
    models.py      a tiny Qwen2 and its tokenizer, for the LoRA tests, and GGUF files of its shape
                   (`tiny_base_gguf`, `tiny_lora_gguf`) for the adapter checks, and a released
                   reader's folder (`write_released`)
    integration.py `run_measured`: a real question asked, measured and summarised

Every name a test imports is re-exported here: `from tests.fakes import X`.
"""

from tests.fakes.cli import benchmark_script, run_cli
from tests.fakes.data import FIXTURE_ANSWERS, FIXTURE_DATA, MUSIQUE, RECORDS, SHARED_DATA, requires_shared_data
from tests.fakes.integration import run_measured
from tests.fakes.lm import (
    Call,
    FakeLlama,
    Raw,
    ScriptedEngine,
    chat_reply,
    first_output_field,
    generic_lm,
    generic_responder,
    review_kind,
    run_scripted,
    scripted_lm,
    use_lm,
)
from tests.fakes.models import (
    CHATML,
    TINY_PROJECTIONS,
    WORDS,
    compiled_with_adapter,
    loaded_adapter,
    tiny_base_gguf,
    tiny_lora_gguf,
    tiny_lora_tensors,
    tiny_model,
    tiny_tokenizer,
    write_gguf,
    write_released,
)
from tests.fakes.retrievers import FakeRetriever, hashing_embed, hashing_embed_counting, passage
from tests.fakes.scripts import BeamScript, Q, answering, review, run, tree_retriever
from tests.fakes.servers import FakeEndpoint, Overlap, llama_server, local_client, simulated_endpoint

__all__ = [
    "benchmark_script",
    "CHATML", "FIXTURE_ANSWERS", "FIXTURE_DATA", "MUSIQUE", "Q", "RECORDS", "SHARED_DATA", "WORDS", "BeamScript",
    "Call", "FakeEndpoint", "FakeLlama", "FakeRetriever", "Overlap", "Raw", "ScriptedEngine", "answering",
    "chat_reply", "first_output_field", "generic_lm", "generic_responder", "hashing_embed",
    "hashing_embed_counting", "llama_server", "local_client", "passage", "requires_shared_data", "review",
    "review_kind", "run", "run_cli", "run_measured", "run_scripted", "scripted_lm", "simulated_endpoint",
    "tiny_model", "tiny_tokenizer", "tree_retriever", "use_lm", "TINY_PROJECTIONS", "tiny_base_gguf",
    "tiny_lora_gguf", "write_released", "tiny_lora_tensors", "write_gguf", "compiled_with_adapter", "loaded_adapter",
]
