"""Where treeqa reads its environment: every knob is a `TREEQA_*` variable. The plugin variables
(`TREEQA_PROGRAMS`, `TREEQA_COMPILERS`, `TREEQA_RETRIEVERS`, `TREEQA_DATASETS`: modules outside the
package to import) are read by `plugin_modules` each time a registry discovers its entries."""

from __future__ import annotations

import os
import re
import shlex
import sys
import threading
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # the checkout, or site-packages when installed
# the released trained reader (treeqa train reader's adapter and record), package data
RELEASED_READER_DIR = Path(__file__).resolve().parent / "train" / "released"


def in_checkout(root: Path = PROJECT_ROOT) -> bool:
    """Whether treeqa runs from a source checkout (which keeps its cache and runs beside it)."""
    return (root / "pyproject.toml").is_file()


def default_cache_dir(root: Path = PROJECT_ROOT) -> Path:
    """`.cache` in a checkout; installed, the user's cache folder (`$XDG_CACHE_HOME/treeqa`, else
    `~/.cache/treeqa`), never inside site-packages."""
    if in_checkout(root):
        return root / ".cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "treeqa"


def default_runs_dir(root: Path = PROJECT_ROOT) -> Path:
    """Where runs go unless `--out` says: `runs/` in a checkout, else `runs/` in the working folder."""
    return root / "runs" if in_checkout(root) else Path.cwd() / "runs"


def _default_data_dir() -> Path | None:
    """`../shared/data` beside the checkout, where the offline benchmark copies live."""
    candidate = PROJECT_ROOT.parent / "shared" / "data"
    return candidate if candidate.is_dir() else None


def default_user_data_dir() -> Path:
    """Where `treeqa data get` puts what it downloads: `$XDG_DATA_HOME/treeqa`, else
    `~/.local/share/treeqa` (searched after the data dir)."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "treeqa"


class Settings(BaseSettings):
    """Paths and resources; override any field with `TREEQA_<NAME>`."""

    model_config = SettingsConfigDict(env_prefix="TREEQA_", extra="ignore")

    data_dir: Path | None = Field(default_factory=_default_data_dir,
                                  description="Folder holding the benchmark files (layout of ../shared/data).")
    user_data_dir: Path = Field(default_factory=default_user_data_dir,
                                description="Where `treeqa data get` writes the official files; the loaders "
                                            "search it after the data dir.")
    data_mirror: str | None = Field(default=None,
                                    description="A URL that stands in for every official source in `treeqa data "
                                                "get` (files at MIRROR/<dataset>/<file name>); checked as the "
                                                "official files are.")
    cache_dir: Path = Field(default_factory=default_cache_dir,
                            description="Everything treeqa writes: model, indexes, DSPy and datasets caches.")
    model_path: Path | None = Field(default=None,
                                    description="A GGUF file to use instead of the assembled embedded model.")
    threads: int = Field(default=2, ge=1, description="CPU threads for the embedded LLM.")
    adapt_threads: bool = Field(default=True,
                                description="Generate with fewer threads while other processes keep cores "
                                            "busy (Linux; prompts keep every thread).")
    context_size: int = Field(default=4096, ge=512, description="Context window of the embedded LLM, in tokens.")
    max_tokens: int = Field(default=512, ge=1, description="Default cap on generated tokens per call.")
    allow_hub: bool = Field(default=False,
                            description="Let loaders fetch a dataset from the Hugging Face hub when it is not local.")
    full_splits: bool = Field(default=False,
                              description="Read every record of an official full file (e.g. HotpotQA's whole dev "
                                          "set), not only our subset's records.")
    kv_cache_mb: int = Field(default=512, ge=0,
                             description="RAM for saved prompt-prefix states of the embedded LLM (0 disables).")
    memory_cache_entries: int = Field(default=2048, ge=1,
                                      description="LM responses DSPy keeps in RAM (the disk cache keeps all).")
    nprobe: int = Field(default=16, ge=1, description="IVF lists a dense query probes (approximate indexes).")
    ef_search: int = Field(default=64, ge=1, description="HNSW candidates a dense query keeps (approximate indexes).")
    lm_timeout: float = Field(default=120.0, gt=0,
                              description="Seconds one call to an endpoint may take in all, retries and their "
                                          "back-off included, before it counts as failed.")
    lm_retries: int = Field(default=2, ge=0,
                            description="Retries of a call to an endpoint after a transient error (429, 5xx, a "
                                        "timeout, a dropped connection), with back-off, within TREEQA_LM_TIMEOUT.")

    api_key: SecretStr | None = Field(default=None,
                                      description="The key sent (as a bearer token) to the endpoint --lm names; "
                                                  "never written to a run or a log.")

    finetune_budget_s: float | None = Field(default=None, gt=0,
                                            description="Seconds a LoRA training may take before it stops "
                                                        "(checkpointed; the adapter holds what was learned).")

    @property
    def dspy_cache_dir(self) -> Path:
        return self.cache_dir / "dspy"

    @property
    def index_dir(self) -> Path:
        return self.cache_dir / "indexes"

    @property
    def hf_cache_dir(self) -> Path:
        return self.cache_dir / "huggingface"


class _Plugins(BaseSettings):
    """The plugin variables, read afresh each time (a module may be named after the first import)."""

    model_config = SettingsConfigDict(env_prefix="TREEQA_", extra="ignore")

    programs: str = ""
    compilers: str = ""
    retrievers: str = ""
    datasets: str = ""


PLUGIN_KINDS = tuple(_Plugins.model_fields)


def plugin_modules(kind: str) -> list[str]:
    """The importable module names `TREEQA_<KIND>` lists (comma-separated), for `kind` one of
    PLUGIN_KINDS."""
    if kind not in PLUGIN_KINDS:
        raise ValueError(f"no plugin variable for {kind!r}; choose one of {', '.join(PLUGIN_KINDS)}")
    return [name.strip() for name in getattr(_Plugins(), kind).split(",") if name.strip()]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


# --- keeping keys out of files ------------------------------------------------------------------
# A key can reach text three ways: the command line (`--api-key`), an endpoint's error that echoes
# the request's Authorization header, and credentials inside a URL (`https://user:secret@host`).
# `redact` is the one scrubber for all of them; it is applied where failure text is made, at the
# CLI's error door and to the recorded command line.

REDACTED = "[redacted]"
MIN_KEY_CHARS = 8  # a shorter "key" ("none", "x") is a placeholder, and would blank common words
_SECRETS: set[str] = set()
_URL_CREDENTIALS: dict[str, str] = {}  # an api_base without userinfo -> the one the user gave
_SECRETS_LOCK = threading.Lock()
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=%-]+")
_KEY_FIELD = re.compile(r"""(?i)\b(api[_-]?key|authorization|x-api-key)(["']?\s*[:=]\s*["']?)"""
                        r"""(?!(?:bearer|basic)\s)[^\s"',}]+""")  # a scheme's credentials: _AUTH_SCHEME's
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]*@")
_KEY_OPTION = re.compile(r"^--api-key(=.*)?$")


def remember_secret(value: str | None) -> None:
    """Scrub `value` (a key given to get_lm, or a URL's password) from every text `redact` sees
    in this process, as it is and percent-encoded."""
    if value and len(value) >= MIN_KEY_CHARS:
        with _SECRETS_LOCK:
            _SECRETS.update({value, quote(value, safe=""), unquote(value)})


def _known_secrets() -> list[str]:
    try:
        settings_key = get_settings().api_key
    except ValueError:  # a bad TREEQA_* variable: the error being reported may be that one
        settings_key = None
    if settings_key is not None:
        remember_secret(settings_key.get_secret_value())
    with _SECRETS_LOCK:
        return sorted(_SECRETS, key=len, reverse=True)  # longest first: a key inside another is not half-cut


def redact(text: str) -> str:
    """`text` without keys: the configured key and any key get_lm was given (plain or
    percent-encoded), bearer and Basic credentials, api_key/Authorization fields, and a URL's
    userinfo."""
    text = str(text)
    for secret in _known_secrets():
        text = text.replace(secret, REDACTED)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _KEY_FIELD.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)


def without_userinfo(url: str | None) -> str | None:
    """`url` as a spec stores it: no `user:secret@` (remembered, so this process still sends
    it, and scrubbed from text); `with_userinfo` gives the URL back for the request."""
    if not url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    bare = urlunsplit(parts._replace(netloc=host))
    user, _, password = userinfo.partition(":")
    remember_secret(password or user)
    with _SECRETS_LOCK:
        _URL_CREDENTIALS[bare] = url
    return bare


def with_userinfo(url: str | None) -> str | None:
    """The URL `without_userinfo` stripped, with its credentials again (for the request alone)."""
    with _SECRETS_LOCK:
        return _URL_CREDENTIALS.get(url, url) if url else url


def portable_path(path: str | Path, root: Path | None = None) -> str:
    """An absolute path inside the working folder (`root`) as relative to it, so what a run records
    holds in another checkout; any other path as given."""
    root = (root or Path.cwd()).resolve()
    given = Path(path)
    if not given.is_absolute():
        return str(path)
    try:
        return given.resolve().relative_to(root).as_posix() or "."
    except ValueError:
        return str(path)


def _portable_word(word: str) -> str:
    option, eq, value = word.partition("=")
    if eq and option.startswith("--") and value.startswith("/"):
        return f"{option}={portable_path(value)}"
    return portable_path(word) if word.startswith("/") else word


def recorded_command(argv: list[str] | None = None) -> str:
    """The command line as a run records it: `--api-key`'s value left out, paths inside the working
    folder relative to it (`portable_path`), then `redact`ed."""
    argv = list(sys.argv if argv is None else argv)
    words, hide_next = [Path(argv[0]).name if argv else "treeqa"], False
    for word in argv[1:]:
        if hide_next:
            words.append(REDACTED)
            hide_next = False
        elif (match := _KEY_OPTION.match(word)) is not None:
            words.append(f"--api-key={REDACTED}" if match.group(1) else word)
            hide_next = match.group(1) is None
        else:
            words.append(_portable_word(word))
    return redact(shlex.join(words))
