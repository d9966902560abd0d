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
