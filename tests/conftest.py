from contextlib import contextmanager
from pathlib import Path

import pytest

from treeqa.settings import PROJECT_ROOT, get_settings

FIXTURE_DATA = Path(__file__).parent / "fixtures" / "data"
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture
def settings_env(monkeypatch):
    """Set TREEQA_* variables for one test; the settings object is rebuilt around it."""

    def apply(**values):
        for key, value in values.items():
            monkeypatch.setenv(f"TREEQA_{key.upper()}", str(value))
        get_settings.cache_clear()
        return get_settings()

    yield apply
    get_settings.cache_clear()


@pytest.fixture
def fixture_data(settings_env, tmp_path):
    """The hand-written files in the official layouts, with a throwaway cache dir."""
    return settings_env(data_dir=FIXTURE_DATA, cache_dir=tmp_path / "cache")


requires_shared_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is not present")


@pytest.fixture(scope="module")
def real_hotpot():
    """The embedded LM (uncached), the dense retriever over the pooled HotpotQA corpus, and the
    first 3 questions of the seeded dev sample: what the integration tests run on."""
    from treeqa.data import load_examples
    from treeqa.lm import get_lm
    from treeqa.retrievers import get_retriever

    return get_lm("local", cache=False), get_retriever("hotpotqa", "dense"), load_examples("hotpotqa", "dev", n=3)


@contextmanager
def llama_server(threads: int = 2):
    """llama.cpp's OpenAI-compatible server (llama-cpp-python's server extra) with the embedded
    GGUF on 127.0.0.1 at a free port, log-probabilities on; yields its base URL, stops it after."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from treeqa.lm import model_path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()),
                               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                               "--n_threads", str(threads), "--model_alias", "qwen", "--logits_all", "true"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=1):
                    break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError(f"llama.cpp's server exited with status {server.returncode}") from None
                time.sleep(0.2)
        else:
            raise RuntimeError("llama.cpp's server did not answer within 120 s")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(scope="module")
def llama_server_url():
    """One real server for a test module (see `llama_server`)."""
    with llama_server() as url:
        yield url
