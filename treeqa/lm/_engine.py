"""The embedded engine: one canonical DSPy request -> one llama.cpp chat completion.

It runs in-process through DSPy 3.4's engine interface (`dspy.LM(..., engine=LlamaEngine)`):
DSPy keeps its adapters, cache, retries and usage tracking. Private to `treeqa.lm`.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from dspy._vendor.lm15.types import TokenLogprob, TopLogprob
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from treeqa.lm import _greedy_grammar as greedy_grammar
from treeqa.lm import _lean_state as lean_state
from treeqa.lm import _weights as local_model
from treeqa.lm._cpu_share import CpuShare, generation_threads
from treeqa.lm.adapter_check import check_adapter
from treeqa.settings import get_settings

log = logging.getLogger(__name__)


@dataclass
class EngineStats:
    """Counters over the engine's life: what was sent, what llama.cpp actually computed."""

    calls: int = 0
    prompt_tokens: int = 0
    prompt_tokens_computed: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    per_call: list[dict] = field(default_factory=list, repr=False)


def _text_of(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content)


def request_messages(request) -> list[dict]:
    """OpenAI-style chat messages from a canonical `dspy.lm15.Request`."""
    messages = []
    if request.system is not None:
        messages.append({"role": "system", "content": _text_of(request.system)})
    for m in request.messages:
        messages.append({"role": m.role, "content": m.text or ""})
    return messages


def ggml_has_amx() -> bool:
    """Whether the installed llama.cpp was compiled with ggml's AMX kernels (`-march=native` on a
    Xeon with AMX). Loading weights into their buffers crashed every first decode on this
    project's AMX machines (llama-cpp-python 0.3.36), so the Makefile builds without them."""
    import llama_cpp  # heavy: llama.cpp's native library, loaded on first use

    for lib in sorted((Path(llama_cpp.__file__).parent / "lib").glob("libggml-cpu*")):
        try:
            has_amx = ctypes.CDLL(str(lib)).ggml_cpu_has_amx_int8
        except (OSError, AttributeError):
            continue
        has_amx.restype = ctypes.c_int
        return bool(has_amx())
    return False


@contextmanager
def _extra_buffer_types_off():
    """Load a model without ggml's extra buffer types (AMX, weight repacking): llama_cpp.Llama
    takes its model params from `llama_model_default_params` and exposes no switch of its own."""
    import llama_cpp.llama_cpp as api  # heavy native library: loaded when a model is

    default = api.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    api.llama_model_default_params = params
    try:
        yield
    finally:
        api.llama_model_default_params = default


def _all_cores_ours() -> bool:
    """Whether this process may run on every core the machine reports (what /proc/stat counts)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return affinity is None or len(affinity(0)) == os.cpu_count()


class LlamaEngine:
    """One llama.cpp model in this process, serving DSPy requests one at a time.

    It declares structured-output support: a JSON schema that DSPy's JSONAdapter derives from
    a signature's output fields is compiled to a llama.cpp grammar (cached per schema), so
    the model can only emit JSON that parses into those fields.

    Greedy unless the request asks for a temperature; the GGUF's own chat template formats
    the messages. llama.cpp reuses the KV cache of the prompt prefix shared with the previous
    call, and a RAM cache of earlier prefix states (`kv_cache_mb`) lets predictors that
    alternate (ask / answer / score) resume from their own prefixes too.

    Args:
        model_path: the GGUF file; defaults to the assembled embedded model.
        n_threads: CPU threads; defaults to `TREEQA_THREADS`.
        n_ctx: context window in tokens.
        kv_cache_mb: RAM for saved prefix states; 0 turns the state cache off.
        adapter: a LoRA adapter (llama.cpp's GGUF format, `treeqa.lm.adapter`) added to the
            weights for every call of this engine; its file is read into RAM (no mmap then).
            It is compared with the model first (`treeqa.lm.adapter_check`): one that does not
            fit is an AdapterError, never llama.cpp's crash.
        llama: an object with llama_cpp.Llama's `create_chat_completion` (tests pass a fake).
    """

    supports_response_schema = True
    supported_params = frozenset({"response_format", "temperature", "max_tokens", "stop", "logprobs"})
    MAX_TOP_LOGPROBS = 20

    def __init__(self, model_path: Path | None = None, n_threads: int | None = None,
                 n_ctx: int | None = None, kv_cache_mb: int | None = None, max_tokens: int | None = None,
                 adapter: Path | str | None = None, llama=None, lazy: bool = False):
        settings = get_settings()
        self.max_tokens = max_tokens or settings.max_tokens
        self.stats = EngineStats()
        self._lock = threading.Lock()
        self._grammars: dict[str, object] = {}
        self.adapter = Path(adapter) if adapter is not None else None
        self.threads = self.generating_with = n_threads or settings.threads
        self._load_args = (model_path, n_ctx or settings.context_size,
                           settings.kv_cache_mb if kv_cache_mb is None else kv_cache_mb)
        self.llama = self.cpu_share = self._decoding = None
        # lazy: the model loads on the first call (a program loaded for an endpoint, whose adapter
        # predictors ask the server instead, never loads it)
        if llama is not None or not lazy:
            self._loaded(llama if llama is not None else self._reload())

    def _loaded(self, llama) -> None:
        self.llama = llama
        # generation follows the cores other processes leave idle (prompts keep every thread)
        # only where /proc/stat's machine is ours to share: in a container or under an affinity mask
        # smaller than the host, other cores' load would read as ours
        self.cpu_share = (CpuShare() if get_settings().adapt_threads and hasattr(llama, "_ctx")
                          and _all_cores_ours() else None)
        self._decoding = getattr(llama, "treeqa_decoding", None)  # set by greedy_grammar.install
        self._count_evaluated_tokens()

    @staticmethod
    def _load(path: Path, n_threads: int, n_ctx: int, kv_cache_mb: int, adapter: Path | None = None):
        import llama_cpp  # heavy: llama.cpp's native library loads with the first model

        if adapter is not None:  # the one door to llama.cpp's reader, which trusts an adapter's tensors
            check_adapter(adapter, path)
        amx = ggml_has_amx()
        if amx:
            log.warning("this llama.cpp build has ggml's AMX kernels, which segfault the first decode on AMX "
                        "Xeons: loading without extra buffer types (`make install` rebuilds without them)")
        with _extra_buffer_types_off() if amx else nullcontext():
            llama = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads,
                                    n_threads_batch=n_threads, n_batch=512, seed=0, verbose=False,
                                    lora_path=str(adapter) if adapter is not None else None)
        if kv_cache_mb > 0:
            llama.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=kv_cache_mb << 20))
        lean_state.install(llama)
        llama.treeqa_decoding = greedy_grammar.install(llama)
        return llama

    def _reload(self):
        model_path, n_ctx, kv_cache_mb = self._load_args
        return self._load(model_path or local_model.model_path(), self.threads, n_ctx, kv_cache_mb, self.adapter)

    def unload(self) -> bool:
        """Free the model's memory (~1.9 GB) while something else needs it, such as a LoRA
        training in this process; the next call loads it again. True if it was loaded."""
        with self._lock:
            if self.llama is None or not hasattr(self.llama, "_ctx"):  # a stand-in llama stays
                return False
            close = getattr(self.llama, "close", None)
            if close is not None:
                close()
            self.llama = None
            self._grammars.clear()  # grammars belong to the model they were built for
            return True

    def _ensure_loaded(self) -> None:
        if self.llama is None:
            log.info("loading the embedded model%s", " with its adapter" if self.adapter else "")
            cpu_share = self.cpu_share
            self._loaded(self._reload())
            self.cpu_share = cpu_share if cpu_share is not None else self.cpu_share

    def _count_evaluated_tokens(self) -> None:
        """Wrap `llama.eval` so the engine knows how many tokens were really computed."""
        inner = getattr(self.llama, "eval", None)
        if inner is None:
            return
        self._evaluated = 0

        def counting_eval(tokens):
            self._evaluated += len(tokens)
            return inner(tokens)

        self.llama.eval = counting_eval

    @property
    def context_tokens(self) -> int | None:
        """The context window in tokens: a prompt that does not fit it fails the call."""
        with self._lock:
            self._ensure_loaded()
            n_ctx = getattr(self.llama, "n_ctx", None)
        return int(n_ctx()) if callable(n_ctx) else None

    def count_prompt_tokens(self, messages: list[dict]) -> int:
        """The tokens a chat prompt takes: each message's text and its role markers (5 tokens a
        message in ChatML, the embedded model's template) and the reply's opening (3)."""
        with self._lock:
            self._ensure_loaded()
            llama = self.llama

        def tokens(text: str) -> int:
            return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

        return sum(tokens(_text_of(m.get("content"))) + 5 for m in messages) + 3

    def complete(self, request) -> Response:
        config = request.config
        kwargs = {
            "messages": request_messages(request),
            "temperature": config.temperature or 0.0,
            "max_tokens": config.max_tokens or self.max_tokens,
            "stop": list(config.stop) or None,
        }
        if config.temperature:
            kwargs["seed"] = config.seed if getattr(config, "seed", None) is not None else 0
        if config.response_format:
            grammar = self._grammar_for(config.response_format)
            if grammar is not None:
                kwargs["grammar"] = grammar
            else:
                kwargs["response_format"] = {"type": "json_object"}
        with self._lock:
            self._ensure_loaded()
            # after the load: a lazy engine's first call must not lose its log-probabilities
            wants_logprobs = config.logprobs is not None and not config.temperature and self._decoding is not None
            self._fit_generation_threads()
            self._evaluated = 0
            if wants_logprobs:
                self._decoding.top_logprobs = min(int(config.logprobs), self.MAX_TOP_LOGPROBS)
            started = time.perf_counter()
            try:
                out = self.llama.create_chat_completion(**kwargs)
            finally:
                if self._decoding is not None:
                    self._decoding.top_logprobs = None
            seconds = time.perf_counter() - started
            evaluated = self._evaluated
            sampler = self._decoding.last if wants_logprobs else None
        usage = out.get("usage") or {}
        prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
        logprobs = self._token_logprobs(sampler.logprobs[:completion]) if sampler is not None else None
        # generated tokens are fed back one by one, except the last one
        computed = min(prompt, max(0, evaluated - max(0, completion - 1))) if evaluated else prompt
        self._record(prompt, computed, completion, seconds)
        choice = out["choices"][0]
        return Response(
            id=out.get("id"), model=out.get("model", "local"),
            message=Message.assistant([TextPart(choice["message"].get("content") or "")]),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            usage=Usage(input_tokens=prompt, output_tokens=completion,
                        cache_read_tokens=max(0, prompt - computed)),
            logprobs=logprobs,
        )

    def _fit_generation_threads(self) -> None:
        """Generate on the cores other processes left idle since the last call: beside one busy
        process 2 threads generated 11 tokens a second and 1 thread 24 (34 alone), while a
        prompt keeps both threads (benchmarks/engine_under_load.md)."""
        busy = self.cpu_share.others_busy() if self.cpu_share is not None else None
        if busy is None:  # not measurable (no /proc, too short a window): as before
            return
        wanted = generation_threads(self.threads, busy)
        if wanted != self.generating_with:
            import llama_cpp  # late: loaded by now; tests stand one in through sys.modules

            llama_cpp.llama_set_n_threads(self.llama._ctx.ctx, wanted, self.threads)
            log.debug("generating with %d thread(s), prompts with %d", wanted, self.threads)
            self.generating_with = wanted

    def _token_logprobs(self, steps) -> tuple[TokenLogprob, ...]:
        """The sampler's per-step records as lm15 token log-probabilities (text, not bytes: a
        token can hold part of a UTF-8 character)."""
        def text(token: int) -> str:
            return self.llama.detokenize([token]).decode("utf-8", errors="replace")

        return tuple(TokenLogprob(token=text(token), logprob=logprob, token_id=token,
                                  top=tuple(TopLogprob(token=text(t), logprob=lp, token_id=t) for t, lp in top))
                     for token, logprob, top in steps)

    def _grammar_for(self, response_format: dict):
        """A grammar for a JSON-schema response format (None for plain JSON mode)."""
        schema = response_format.get("schema") or (response_format.get("json_schema") or {}).get("schema")
        if not schema:
            return None
        key = json.dumps(schema)  # not sorted: the grammar writes fields in the schema's order
        if key not in self._grammars:
            self._grammars[key] = self.grammar_from_schema(key)
        return self._grammars[key]

    @staticmethod
    def grammar_from_schema(schema_json: str):
        from llama_cpp import LlamaGrammar  # heavy native library: loaded when a grammar is built

        return LlamaGrammar.from_json_schema(schema_json, verbose=False)

    def _record(self, prompt: int, computed: int, completion: int, seconds: float) -> None:
        s = self.stats
        s.calls += 1
        s.prompt_tokens += prompt
        s.prompt_tokens_computed += computed
        s.completion_tokens += completion
        s.seconds += seconds
        s.per_call.append({"prompt": prompt, "computed": computed, "completion": completion,
                           "seconds": round(seconds, 3)})

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


_local_engines: dict[tuple, LlamaEngine] = {}
_engines_lock = threading.Lock()


def unload_local_engines() -> int:
    """Unload every embedded engine of this process (each reloads on its next call): how many
    were loaded. A LoRA training calls it first, so the engine's memory is the trainer's."""
    with _engines_lock:
        engines = list(_local_engines.values())
    return sum(engine.unload() for engine in engines)


def local_engine(**overrides) -> LlamaEngine:
    """One shared engine per configuration: the model is loaded once per process."""
    key = tuple(sorted(overrides.items()))
    with _engines_lock:
        if key not in _local_engines:
            _local_engines[key] = LlamaEngine(**overrides)
        return _local_engines[key]
