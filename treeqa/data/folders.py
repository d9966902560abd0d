"""The folders benchmark files are looked for in, in order: the data dir (`TREEQA_DATA_DIR`,
else `../shared/data` beside the checkout), then the user data folder that `treeqa data get`
fills (`TREEQA_USER_DATA_DIR`, else `~/.local/share/treeqa`). A file the first holds wins, so
an explicit data dir is never shadowed by a download."""

from __future__ import annotations

from pathlib import Path

from treeqa.settings import get_settings


def user_data_dir() -> Path:
    """Where `treeqa data get` writes."""
    return get_settings().user_data_dir


def data_roots() -> list[Path]:
    """Every folder searched, in order (the data dir only where one is set or found)."""
    settings = get_settings()
    roots = [settings.data_dir] if settings.data_dir is not None else []
    return [*roots, settings.user_data_dir] if settings.user_data_dir not in roots else roots


def find_file(rel: str) -> Path | None:
    """The first data folder's file at `rel` (a path in the layout of ../shared/data), or None."""
    for root in data_roots():
        if (root / rel).is_file():
            return root / rel
    return None
