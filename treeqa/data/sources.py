"""Where each dataset's official files come from, for `treeqa data get` (`download.py` fetches).

A `Source` is registered by name by its dataset's file (`treeqa/data/datasets/`): the files to
download (`Remote`: URL, sha256 where one is established, how to unpack, and which of its files
go where in the data layout), the licence and the size, and for a host that cannot be fetched by
URL (Google Drive) the words that say how to get the file by hand (`--from FOLDER`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from types import MappingProxyType
from urllib.parse import urlparse

from treeqa.data.loaders import DataError
from treeqa.registry import Registry

UNPACKERS = ("zip", "gunzip", "bunzip2", None)
# what a download is, for the check before it is installed: its unpacker's format, else its extension
KIND_OF_UNPACKER = {"zip": "zip", "gunzip": "gzip", "bunzip2": "bz2"}
KIND_OF_SUFFIX = {".json": "json", ".jsonl": "jsonl", ".zip": "zip", ".whl": "zip", ".gz": "gzip", ".bz2": "bz2"}


@dataclass(frozen=True)
class Remote:
    """One file to download.

    Args:
        url: the official address.
        files: {member: path in the data layout}. For a zip (`unpack="zip"`) a member is a name in
            the archive (a name without a folder matches that file in any folder); otherwise the
            only member is "" (the file itself, decompressed where `unpack` says).
        sha256: the download's hash where it is established; None: pinned on first download
            (`sha256.lock` in the user data folder) and checked on every later one.
        name: the file name (what `--from FOLDER` holds); default: the URL's last part.
        unpack: "zip", "gunzip", "bunzip2" or None (kept as it is).
        by_hand: why the URL cannot be fetched by a program (e.g. Google Drive's confirmation
            page); the file is then read from `--from FOLDER` only.
    """

    url: str
    files: Mapping[str, str]
    sha256: str | None = None
    name: str | None = None
    unpack: str | None = None
    by_hand: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "files", MappingProxyType(dict(self.files)))
        if self.unpack not in UNPACKERS:
            raise ValueError(f"{self.url}: unpack must be one of {UNPACKERS}, not {self.unpack!r}")
        if self.unpack != "zip" and set(self.files) != {""}:
            raise ValueError(f"{self.url}: a file that is not a zip has one member, \"\"")

    @property
    def file_name(self) -> str:
        return self.name or PurePosixPath(urlparse(self.url).path).name

    @property
    def kind(self) -> str | None:
        """"json", "jsonl", "zip", "gzip" or "bz2": what `treeqa data get` checks the download parses
        as before it installs or pins it; None (text): checked only for being no web page."""
        return KIND_OF_UNPACKER.get(self.unpack) or KIND_OF_SUFFIX.get(PurePosixPath(self.file_name).suffix)


@dataclass(frozen=True)
class Source:
    """A dataset's official files: what `treeqa data get NAME` downloads."""

    name: str
    remotes: tuple[Remote, ...]
    homepage: str
    licence: str
    size: str  # what is downloaded, in words ("44 MB")

    def targets(self) -> list[str]:
        """Every path in the data layout its downloads fill."""
        return [target for remote in self.remotes for target in remote.files.values()]


SOURCES: Registry[Source] = Registry("data source", error=DataError)


def register_source(source: Source) -> Source:
    """Offer a source to `treeqa data get` by its name."""
    return SOURCES.register(source.name, source)
