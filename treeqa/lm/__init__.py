"""Language models from a name: "local" is the embedded llama.cpp model, anything else is `dspy.LM`.

This is the door: the rest of treeqa (and apps) import only from here. The engine, the
weights and the llama-cpp-python patches are private modules of this package:
`_engine` (LlamaEngine), `_endpoint` (EndpointLM, for remote servers), `_weights` (assembling
and verifying the GGUF), `_greedy_grammar` and `_lean_state`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import dspy
from dspy.clients.lm import _is_openai_reasoning_model  # DSPy's own test of which models refuse a temperature

from treeqa.lm import _weights
from treeqa.lm._endpoint import EndpointLM, EndpointTimeoutError
from treeqa.lm._engine import EngineStats, LlamaEngine, local_engine, request_messages
from treeqa.lm._weights import ModelCorruptError, ModelMissingError, model_path, sha256_of
from treeqa.lm._weights import install as install_model
from treeqa.settings import get_settings, remember_secret, with_userinfo, without_userinfo

LOCAL_NAMES = ("local", "embedded")
_cache_lock = threading.Lock()
_cache_secured = False


def secure_cache() -> None:
    """DSPy's disk cache under treeqa's cache dir, unpickling only known-safe types.

    DSPy unpickles its cache entries without restriction by default, so a planted file in the
    cache dir could run code; restricted, an unknown type is refused. Called at the door
    (`get_lm`), once per process."""
    global _cache_secured
    with _cache_lock:
        if not _cache_secured:
            settings = get_settings()
            # the memory layer is bounded: DSPy's default of a million entries grew a server's RSS
            # with every unique question; the disk layer keeps everything
            dspy.configure_cache(disk_cache_dir=str(settings.dspy_cache_dir), restrict_pickle=True,
                                 memory_max_entries=settings.memory_cache_entries)
            _cache_secured = True


def memory_only_cache() -> None:
    """Keep responses in RAM only, at most TREEQA_MEMORY_CACHE_ENTRIES of them: for a server.

    DSPy's disk layer is SQLite under diskcache, whose page cache per connection (one per
    worker thread and shard) grew a server's RSS by 35 MB over 2,000 unique questions and kept
    growing; a server's repeats are recent, and its disk would fill without bound."""
    global _cache_secured
    with _cache_lock:
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True, restrict_pickle=True,
                             memory_max_entries=get_settings().memory_cache_entries)
        _cache_secured = True


class TrainableJSONAdapter(dspy.JSONAdapter):
    """DSPy's JSON adapter, able to write fine-tuning data: DSPy 3.4's JSONAdapter raises
    NotImplementedError there, so `dspy.BootstrapFinetune` could not train a model that answers
    in JSON. A call becomes the chat the model is sent and, as the assistant's reply, the JSON
    object the adapter parses (the same fields in the same order)."""

    formats_as = "JSONAdapter"  # its prompts are JSONAdapter's: logged calls keyed by that name still replay

    def format_finetune_data(self, signature, demos, inputs, outputs) -> dict[str, list]:
        messages = self.format(signature=signature, demos=demos, inputs=inputs)
        reply = self.format_assistant_message_content(signature=signature, outputs=outputs)
        return {"messages": [*messages, {"role": "assistant", "content": reply}]}


def adapter_for(lm: dspy.BaseLM) -> dspy.Adapter:
    """JSON under a grammar where the engine declares schema support (the embedded model), so
    every output parses; elsewhere DSPy's chat adapter (with its own JSON retry)."""
    engine = getattr(lm, "_engine_spec", None)
    if getattr(engine, "supports_response_schema", False):
        return TrainableJSONAdapter()
    return dspy.ChatAdapter()


def configure(name: str = "local", **kwargs) -> dspy.LM:
    """Set DSPy's LM and the adapter that suits it, for apps: `treeqa.lm.configure("local")`."""
    lm = get_lm(name, **kwargs)
    dspy.configure(lm=lm, adapter=adapter_for(lm))
    return lm


def local_model_id(adapter: Path | None = None) -> str:
    """The model string DSPy caches under: it names the exact weights (and the LoRA adapter's
    hash, where one is added), so new weights miss the cache."""
    path = _weights.model_path()
    if path == _weights.assembled_path():
        name = f"local/{_weights.MODEL_NAME}-{_weights.SHA256[:12]}"
    else:
        stat = path.stat()
        name = f"local/{path.stem}-{stat.st_size}-{int(stat.st_mtime)}"
    return f"{name}+lora-{sha256_of(Path(adapter))[:12]}" if adapter is not None else name


def base_model_sha256() -> str:
    """The hash an adapter records as its base: the embedded GGUF's, or a user's own file's."""
    path = _weights.model_path()
    return _weights.SHA256 if path == _weights.assembled_path() else _weights.sha256_of(path)


def get_lm(name: str = "local", *, api_base: str | None = None, api_key: str | None = None,
           cache: bool = True, adapter: str | Path | None = None, **kwargs) -> dspy.LM:
    """A `dspy.LM` for `name`.

    "local" (or "embedded") is the in-process model; any other name is handed to `dspy.LM`
    (e.g. "openai/gpt-4o-mini", or "hosted_vllm/Qwen2.5-7B-Instruct" with `api_base`).
    `adapter` (embedded model only) is a LoRA adapter in llama.cpp's GGUF format that the
    engine adds to the weights; its calls are cached apart from the base model's.
    `api_key` is sent to the endpoint as a bearer token; without it, `TREEQA_API_KEY`, and for
    `openai/<model>` at another base URL `OPENAI_API_KEY` (what the name says), else the
    provider's own variable as LiteLLM reads it.
    """
    if not name or not name.strip():
        raise ValueError("an LM name is required, e.g. 'local' or 'openai/gpt-4o-mini'")
    secure_cache()
    if name in LOCAL_NAMES:
        # late: treeqa.lm.provider imports this module back (a circle); only the embedded model needs it
        from treeqa.lm.provider import EmbeddedLM, EmbeddedProvider, register_adapter

        engine = local_engine(adapter=str(adapter), lazy=True) if adapter is not None else local_engine()
        model = register_adapter(adapter) if adapter is not None else local_model_id()
        return EmbeddedLM(model, engine=engine, cache=cache, temperature=0.0, num_retries=0,
                          provider=EmbeddedProvider(), **kwargs)
    if adapter is not None:
        raise ValueError("a LoRA adapter is added to the embedded model only; an endpoint serves its own weights")
    settings = get_settings()
    api_key = api_key or (settings.api_key.get_secret_value() if settings.api_key else None)
    if api_base:  # a spec stores it without userinfo; the request gets back what the user gave
        api_base = with_userinfo(without_userinfo(api_base))
        kwargs["api_base"] = api_base
        spoken = server_dialect(name, api_base)
        if spoken != name and not api_key:
            # LiteLLM would read the vLLM dialect's variable (HOSTED_VLLM_API_KEY); `openai/...` names OpenAI's
            api_key = os.environ.get("OPENAI_API_KEY")
        name = spoken
        if name.startswith("hosted_vllm/"):
            # a provider that refuses a field it does not know is asked again without it (EndpointLM)
            kwargs["extra_body"] = {**UNPENALISED, **(kwargs.get("extra_body") or {})}
    if api_key:
        remember_secret(api_key)  # scrubbed from every failure text, log line and error of this process
        kwargs["api_key"] = api_key
    if "temperature" not in kwargs and not _is_openai_reasoning_model(name):
        # greedy, as the embedded engine is: a server's own default samples (llama.cpp's server,
        # vLLM), which made two runs of one question give different answers. OpenAI's reasoning
        # models accept only their default.
        kwargs["temperature"] = 0.0
    # a hung or failing endpoint fails the call within TREEQA_LM_TIMEOUT, retries included, never the run
    return EndpointLM(name, deadline=settings.lm_timeout, retries=settings.lm_retries, cache=cache, **kwargs)


# Plain argmax, as the embedded engine decodes: llama-cpp-python's server penalises repeated
# tokens by default (1.1); under it every zero-shot ToR review read "relevant, not sufficient,
# search", 26 calls a question against 6 without it (benchmarks/endpoint.md). llama.cpp's servers
# read the field; vLLM ignores a field it does not know (its own repetition_penalty is 1.0).
UNPENALISED = {"repeat_penalty": 1.0}


def server_dialect(name: str, api_base: str) -> str:
    """`openai/<model>` at a server of the user's own, spoken to as DSPy speaks to vLLM.

    DSPy 3.4 sends OpenAI's own endpoint the token cap as `max_completion_tokens`, which
    llama.cpp's server ignores: no signature's cap reached it, and a greedy reply that never
    ended ran on to the context's end (ReAct's first step took over 120 s). Servers of one's
    own (llama.cpp, vLLM, SGLang, TGI) all read `max_tokens`, which DSPy's vLLM dialect sends.
    """
    provider, _, model = name.partition("/")
    if provider == "openai" and model and "api.openai.com" not in api_base:
        return f"hosted_vllm/{model}"
    return name


def is_embedded(lm) -> bool:
    """Whether `lm` runs on the in-process engine (which serves one call at a time)."""
    return isinstance(getattr(lm, "_engine_spec", None), LlamaEngine)


def prompt_window(lm) -> tuple[int, Callable[[list[dict]], int]] | None:
    """(context window in tokens, a counter of a chat prompt's tokens) where `lm`'s engine knows
    both (the embedded model); None where the window is not known here (an endpoint's server)."""
    engine = getattr(lm, "_engine_spec", None)
    window = getattr(engine, "context_tokens", None)
    count = getattr(engine, "count_prompt_tokens", None)
    return (int(window), count) if window and callable(count) else None


__all__ = ["EndpointLM", "EndpointTimeoutError", "EngineStats", "LOCAL_NAMES", "LlamaEngine", "ModelCorruptError",
           "ModelMissingError", "TrainableJSONAdapter", "adapter_for", "base_model_sha256", "configure", "get_lm",
           "install_model", "is_embedded", "local_engine", "local_model_id", "memory_only_cache", "model_path",
           "prompt_window", "request_messages", "secure_cache"]
