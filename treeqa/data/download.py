"""`treeqa data get`: a dataset's official files into the user data folder, the one place treeqa
uses the network, and only when asked.

Each download goes to `<user data>/.staging/<source>/<file>.part`, resumed with an HTTP Range
request where a part is left over (a server that ignores Range sends the whole file, which then
replaces the part). A finished download is checked against its sha256: the one pinned in the
source's file, else the one `sha256.lock` recorded the first time; a mismatch deletes it. Its
files are unpacked into a staging folder and only then moved, each with one rename, to where the
loaders look, so nothing half-written is ever read as data.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from urllib.error import HTTPError, URLError
from urllib.parse import urlparse
from urllib.request import Request, urlopen

from treeqa.data.folders import find_file, user_data_dir
from treeqa.data.loaders import REGISTRY, DataError, locate
from treeqa.data.sources import SOURCES, Remote, Source
from treeqa.settings import get_settings

LOCK_FILE = "sha256.lock"
CHUNK = 1 << 20
TIMEOUT_S = 30.0  # a connection (or a read) that stalls this long fails instead of hanging


def is_present(source: Source) -> bool:
    """Whether the loaders already find what `source` provides: every split of its dataset (our
    subset files or the official ones), or, for a source that is no dataset, every file it fills."""
    if source.name in REGISTRY:
        return all(locate(split_file) is not None for split_file in REGISTRY[source.name].splits.values())
    return all(find_file(target) is not None for target in source.targets())


def get(name: str, from_folder: Path | None = None, if_missing: bool = False,
        progress: bool = True) -> list[Path]:
    """Fetch source `name` (or read its files from `from_folder`), check, unpack and install it;
    the files installed (none when `if_missing` and the loaders already find it)."""
    source = SOURCES.lookup(name)
    if if_missing and is_present(source):
        return []
    root = user_data_dir()
    stage = root / ".staging" / source.name
    stage.mkdir(parents=True, exist_ok=True)
    unpacked = Path(tempfile.mkdtemp(prefix="unpacked-", dir=stage))
    try:
        downloads = [(remote, _obtain(source, remote, stage, from_folder, progress)) for remote in source.remotes]
        for remote, path in downloads:
            _unpack(remote, path, unpacked)
        installed = [_publish(unpacked / target, root / target) for target in source.targets()]
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
    for _, path in downloads:
        if path.parent == stage:  # our own download, not the user's file in --from
            path.unlink(missing_ok=True)
    return installed


def part_path(source: Source, remote: Remote) -> Path:
    """Where the download of `remote` is kept while incomplete."""
    return user_data_dir() / ".staging" / source.name / f"{remote.file_name}.part"


def url_of(source: Source, remote: Remote) -> str:
    """The official URL, or its stand-in under TREEQA_DATA_MIRROR (MIRROR/<source>/<file name>)."""
    mirror = get_settings().data_mirror
    return f"{mirror.rstrip('/')}/{source.name}/{remote.file_name}" if mirror else remote.url


def _obtain(source: Source, remote: Remote, stage: Path, from_folder: Path | None, progress: bool) -> Path:
    """The verified download of `remote`: the user's copy in `from_folder`, or fetched."""
    if from_folder is not None:
        path = Path(from_folder) / remote.file_name
        if not path.is_file():
            raise DataError(f"{source.name}: no {remote.file_name} in {from_folder} (from {remote.url})")
        _check(remote, path, delete=False)
        return path
    if remote.by_hand:
        raise DataError(f"{source.name}: {remote.by_hand}; download {remote.file_name} from {remote.url} into a "
                        f"folder and run `treeqa data get {source.name} --from FOLDER`")
    part = part_path(source, remote)
    _fetch(url_of(source, remote), part, source, progress)
    _check(remote, part, delete=True)
    return part


def _offline(source: Source, url: str, reason: object) -> DataError:
    """One line: what could not be reached, and every file to fetch by hand for `--from`."""
    def named(r: Remote) -> str:
        return r.url if PurePosixPath(urlparse(r.url).path).name == r.file_name else f"{r.url} (as {r.file_name})"

    files = " and ".join(named(r) for r in source.remotes)
    return DataError(f"cannot reach {urlparse(url).netloc or url} ({reason}): fetch {files} into a folder and run "
                     f"`treeqa data get {source.name} --from FOLDER`")


def _fetch(url: str, part: Path, source: Source, progress: bool) -> None:
    """Download `url` into `part`, resuming from its size with a Range request."""
    have = part.stat().st_size if part.is_file() else 0
    headers = {"User-Agent": "treeqa-data-get", **({"Range": f"bytes={have}-"} if have else {})}
    try:
        response = urlopen(Request(url, headers=headers), timeout=TIMEOUT_S)
    except HTTPError as exc:
        if exc.code == 416 and have:  # nothing after what we have: the part is whole
            return
        raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (URLError, OSError) as exc:
        raise _offline(source, url, getattr(exc, "reason", exc)) from exc
    with response:
        resumed = have > 0 and response.status == 206 and _range_start(response) == have
        if not resumed:
            have = 0  # a fresh start, or a server that ignored Range and sends the whole file
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        _copy(response.read, part, "ab" if resumed else "wb", have, total, part.name.removesuffix(".part"), progress)
    size = part.stat().st_size
    if total is not None and size != total:
        raise DataError(f"{url}: the connection ended after {size:,} of {total:,} bytes; run the command again "
                        "to resume")


def _range_start(response) -> int | None:
    match = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
    return int(match.group(1)) if match else None


def _copy(read: Callable[[int], bytes], part: Path, mode: str, have: int, total: int | None, label: str,
          progress: bool) -> None:
    from tqdm import tqdm  # the progress bar; only this command draws one

    part.parent.mkdir(parents=True, exist_ok=True)
    with open(part, mode) as fh, tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024,
                                      desc=label, disable=not progress, leave=False) as bar:
        try:
            while chunk := read(CHUNK):
                fh.write(chunk)
                bar.update(len(chunk))
        except OSError as exc:  # a dropped connection: what arrived stays in the part
            raise DataError(f"{label}: the download stopped after {fh.tell():,} bytes ({exc}); run the command "
                            "again to resume") from exc


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _lock_path() -> Path:
    return user_data_dir() / LOCK_FILE


def pinned(remote: Remote) -> str | None:
    """The sha256 a download of `remote` must have: pinned in code, else recorded in sha256.lock."""
    if remote.sha256:
        return remote.sha256
    lock = _lock_path()
    return json.loads(lock.read_text()).get(remote.url) if lock.is_file() else None


def _pin(remote: Remote, digest: str) -> None:
    lock = _lock_path()
    entries = json.loads(lock.read_text()) if lock.is_file() else {}
    entries[remote.url] = digest
    lock.parent.mkdir(parents=True, exist_ok=True)
    temporary = lock.with_suffix(".tmp")
    temporary.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
    os.replace(temporary, lock)


def _check(remote: Remote, path: Path, delete: bool) -> None:
    """Refuse a file whose sha256 is not the pinned one (deleting our own download); pin it when
    none is pinned yet."""
    digest, expected = sha256_of(path), pinned(remote)
    if expected is None:
        _pin(remote, digest)
    elif digest != expected:
        if delete:
            path.unlink(missing_ok=True)
        raise DataError(f"{remote.file_name}: sha256 {digest} is not the pinned {expected} (from {remote.url}); "
                        f"{'the download was deleted and ' if delete else ''}nothing was installed")


def _member(archive: zipfile.ZipFile, wanted: str) -> str:
    names = archive.namelist()
    if wanted in names:
        return wanted
    matches = [n for n in names if n.endswith(f"/{wanted}") and "__MACOSX" not in n]
    if len(matches) != 1:
        raise DataError(f"{archive.filename}: {'no' if not matches else 'more than one'} member named {wanted}")
    return matches[0]


def _unpack(remote: Remote, path: Path, into: Path) -> None:
    """Write each of `remote`'s files, from the download at `path`, under `into`."""
    for member, target in remote.files.items():
        out = into / target
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            if remote.unpack == "zip":
                with zipfile.ZipFile(path) as archive, archive.open(_member(archive, member)) as src, \
                        open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
            else:
                opener = {"gunzip": gzip.open, "bunzip2": bz2.open}.get(remote.unpack, open)
                with opener(path, "rb") as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise DataError(f"{remote.file_name}: cannot unpack {member or 'it'} ({exc})") from exc


def _publish(staged: Path, final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, final)
    return final
