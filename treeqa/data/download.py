"""`treeqa data get`: a dataset's official files into the user data folder, the one place treeqa
uses the network, and only when asked.

Each download goes to `<user data>/.staging/<source>/<file>.part`, resumed with an HTTP Range
request where a part is left over (a server that ignores Range sends the whole file, which then
replaces the part; a 206 that starts elsewhere than asked, or repeats the file's start, is refused
and the part deleted, never spliced). One get of a source runs at a time (`get.lock` in its staging
folder). A finished download is checked against its sha256: the one pinned in the source's file,
else the one `sha256.lock` recorded the first time. A file with no hash yet must first parse as
what it is (JSON, JSON lines, a zip whose members read whole, a gzip that decompresses to its end;
never a web page) and unpack; only then is its hash pinned. A download that fails a check is
deleted, so the next run starts over. Its files are unpacked into a staging folder and only then
moved, each with one rename, to where the loaders look, so nothing half-written is ever read as
data. A download, and each file unpacked from one, is at most MAX_BYTES.
"""

from __future__ import annotations

import bz2
import fcntl
import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.client import HTTPException
from pathlib import Path, PurePosixPath
from typing import BinaryIO
from urllib.error import HTTPError, URLError
from urllib.parse import urljoin, urlparse
from urllib.request import HTTPRedirectHandler, Request, build_opener

from treeqa.data.folders import find_file, user_data_dir
from treeqa.data.loaders import REGISTRY, DataError, locate
from treeqa.data.sources import SOURCES, Remote, Source
from treeqa.settings import get_settings

LOCK_FILE = "sha256.lock"
GET_LOCK = "get.lock"  # in a source's staging folder: one get of that source at a time
PINS_LOCK = "pins.lock"  # in the staging folder: one writer of sha256.lock at a time
CHUNK = 1 << 20
TIMEOUT_S = 30.0  # a connection (or a read) that stalls this long fails instead of hanging
MAX_BYTES = 4 << 30  # the most a download, or a file unpacked from one, may be
# an archive unpacks to at most this many times its own size (or UNPACK_FLOOR): text compresses
# 5-15x, a zip bomb 1,000x (a 1.5 MB zip holding a 1.6 GB train.json)
MAX_RATIO = 100
UNPACK_FLOOR = 64 << 20
WINDOW = 1 << 20  # how much of a JSON-lines file's start and end is parsed before it is pinned
ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
WEB_PAGE = re.compile(rb"\s*<(!doctype html|html|head|body|!--|\?xml)", re.IGNORECASE)


def is_present(source: Source) -> bool:
    """Whether the loaders already find what `source` provides: every split of its dataset (our
    subset files or the official ones), or, for a source that is no dataset, every file it fills."""
    if source.name not in REGISTRY:
        return all(find_file(target) is not None for target in source.targets())
    splits = REGISTRY[source.name].splits.values()
    split_files = {path for split_file in splits for path, _ in split_file.candidates()}
    extras = [t for t in source.targets() if t not in split_files]  # e.g. NQ's gold passages: no split's file
    return (all(locate(split_file) is not None for split_file in splits)
            and all(find_file(target) is not None for target in extras))


def get(name: str, from_folder: Path | None = None, if_missing: bool = False,
        progress: bool = True) -> list[Path]:
    """Fetch source `name` (or read its files from `from_folder`), check, unpack and install it;
    the files installed (none when `if_missing` and the loaders already find it). A second get of
    the same source while one runs fails at once (waiting could mean an hour)."""
    source = SOURCES.lookup(name)
    if if_missing and is_present(source):
        return []
    if user_data_dir().exists() and not user_data_dir().is_dir():
        raise DataError(f"TREEQA_USER_DATA_DIR is {user_data_dir()}, a file: name a folder (it is made if missing)")
    stage = user_data_dir() / ".staging" / source.name
    if from_folder is not None and Path(from_folder).resolve().is_relative_to((user_data_dir() / ".staging").resolve()):
        raise DataError(f"--from {from_folder} is inside treeqa's staging folder, whose downloads it deletes: "
                        "give the folder where you keep the files")
    busy = (f"another `treeqa data get {source.name}` is writing {stage}: this one stops rather than wait; "
            "run it again once that one has finished")
    with _locked(stage / GET_LOCK, busy):
        return _get(source, stage, from_folder, progress)


def _get(source: Source, stage: Path, from_folder: Path | None, progress: bool) -> list[Path]:
    """Under the source's lock: fetch and check each file, unpack them all, and only then pin the
    new hashes and install."""
    root = user_data_dir()
    _refuse_folder_targets(source, root)
    pins = read_lock()  # a torn lock is named now, before anything is downloaded
    _remove_stale(stage)
    downloads = [(remote, *_obtain(source, remote, from_folder, pins, progress)) for remote in source.remotes]
    unpacked = Path(tempfile.mkdtemp(prefix="unpacked-", dir=stage))
    try:
        for remote, path, _ in downloads:
            _unpack_or_drop(remote, path, unpacked, ours=path.parent == stage)
        _pin({remote.url: digest for remote, _, digest in downloads if not remote.sha256 and remote.url not in pins})
        installed = [_publish(unpacked / target, root / target) for target in source.targets()]
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
    for _, path, _ in downloads:
        if path.parent == stage:  # our own download, not the user's file in --from
            path.unlink(missing_ok=True)
    return installed


@contextmanager
def _locked(path: Path, busy: str | None = None) -> Iterator[None]:
    """Hold an exclusive flock on `path` (made if missing); with `busy`, fail at once with that line
    instead of waiting."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise DataError(f"{path}: cannot open this lock file ({exc})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if busy else 0))
        except BlockingIOError:
            raise DataError(busy) from None
        yield
    finally:
        os.close(fd)


def _refuse_folder_targets(source: Source, root: Path) -> None:
    """A folder where a file is to be installed would fail the last rename: say so before downloading."""
    for target in source.targets():
        if (root / target).is_dir():
            raise DataError(f"{root / target} is a folder, where `treeqa data get {source.name}` installs a file: "
                            "move the folder away and run it again")


def _remove_stale(stage: Path) -> None:
    """The unpack folders a killed get left behind (none is in use: we hold the source's lock)."""
    for folder in stage.glob("unpacked-*"):
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)


def part_path(source: Source, remote: Remote) -> Path:
    """Where the download of `remote` is kept while incomplete."""
    return user_data_dir() / ".staging" / source.name / f"{remote.file_name}.part"


def url_of(source: Source, remote: Remote) -> str:
    """The official URL, or its stand-in under TREEQA_DATA_MIRROR (MIRROR/<source>/<file name>)."""
    mirror = get_settings().data_mirror
    return f"{mirror.rstrip('/')}/{source.name}/{remote.file_name}" if mirror else remote.url


def _obtain(source: Source, remote: Remote, from_folder: Path | None, pins: dict[str, str],
            progress: bool) -> tuple[Path, str]:
    """The checked download of `remote` and its sha256: the user's copy in `from_folder`, or fetched."""
    if from_folder is not None:
        path = Path(from_folder) / remote.file_name
        if not path.is_file():
            raise DataError(f"{source.name}: no {remote.file_name} in {from_folder} (from {remote.url})")
        return path, _verify(remote, path, pins, ours=False)
    if remote.by_hand:
        raise DataError(f"{source.name}: {remote.by_hand}; download {remote.file_name} from {remote.url} into a "
                        f"folder and run `treeqa data get {source.name} --from FOLDER`")
    part = part_path(source, remote)
    _fetch(url_of(source, remote), part, source, progress)
    return part, _verify(remote, part, pins, ours=True)


def _offline(source: Source, url: str, reason: object) -> DataError:
    """One line: what could not be reached, and every file to fetch by hand for `--from`."""
    def named(r: Remote) -> str:
        return r.url if PurePosixPath(urlparse(r.url).path).name == r.file_name else f"{r.url} (as {r.file_name})"

    files = " and ".join(named(r) for r in source.remotes)
    return DataError(f"cannot reach {urlparse(url).netloc or url} ({reason}): fetch {files} into a folder and run "
                     f"`treeqa data get {source.name} --from FOLDER`")


class _Redirected(Exception):
    """A redirect to an address that is not http(s)."""


class _HttpRedirects(HTTPRedirectHandler):
    """Follows redirects to http and https addresses only (urllib's own also follows ftp://)."""

    def http_error_302(self, req, fp, code, msg, headers):
        target = urljoin(req.full_url, headers.get("Location") or headers.get("URI") or "")
        if urlparse(target).scheme not in ("http", "https"):
            fp.close()
            raise _Redirected(target)
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


_OPENER = build_opener(_HttpRedirects)


def _fetch(url: str, part: Path, source: Source, progress: bool) -> None:
    """Download `url` into `part`, resuming from its size with a Range request."""
    have = part.stat().st_size if part.is_file() else 0
    headers = {"User-Agent": "treeqa-data-get", **({"Range": f"bytes={have}-"} if have else {})}
    label = part.name.removesuffix(".part")
    try:
        response = _OPENER.open(Request(url, headers=headers), timeout=TIMEOUT_S)
    except HTTPError as exc:
        if exc.code == 416 and have:  # nothing after what we have
            if _part_is_whole(exc, have):
                return
            part.unlink()  # the part is longer than the file: start over
            return _fetch(url, part, source, progress)
        raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except _Redirected as exc:
        raise DataError(f"{label}: the download was redirected to {exc}, which is not an http or https address: "
                        "refused") from None
    except (URLError, OSError, HTTPException) as exc:
        raise _offline(source, url, getattr(exc, "reason", exc)) from exc
    with response:
        start, total = _body_start(response, have, part, label)
        _copy(response.read, part, start, total, label, progress)
    _check_arrived(url, part, start, total, label)


def _number(text: str | None) -> int | None:
    return int(text) if text and text.strip().isdigit() else None


def _part_is_whole(error: HTTPError, have: int) -> bool:
    """Whether a 416 to `bytes=have-` means the part is the whole file: unless the server names the
    file's size and it is not `have` (then the part holds more than the file)."""
    match = re.fullmatch(r"bytes \*/(\d+)", (error.headers or {}).get("Content-Range", "").strip())
    return match is None or int(match.group(1)) == have


def _body_start(response, have: int, part: Path, label: str) -> tuple[int, int | None]:
    """Where in the file the body starts, and the file's size where the headers say it. A 200 is
    the whole file (it replaces the part); a 206 must start where we asked and its sizes agree, or
    the part is deleted and this attempt fails: appending would splice two files into one."""
    length = _number(response.headers.get("Content-Length"))
    if response.status != 206:
        return 0, length
    named = response.headers.get("Content-Range", "")
    match = re.fullmatch(r"bytes (\d+)-\d+/(\d+|\*)", named.strip())
    start, whole = (int(match.group(1)), _number(match.group(2))) if match else (None, None)
    total = have + length if length is not None else whole
    if start == have and (whole is None or total == whole):
        return have, total
    part.unlink(missing_ok=True)
    raise DataError(f"{label}: asked for the bytes from {have:,} on, the server answered 206 with Content-Range "
                    f"{named!r} and Content-Length {length}: the partial download was deleted; run the command "
                    "again to start over")


def _copy(read: Callable[[int], bytes], part: Path, start: int, total: int | None, label: str,
          progress: bool) -> None:
    """Write the body into `part` from byte `start` on, up to the size the headers declare (else
    MAX_BYTES). A dropped connection keeps what arrived, to resume, but never an empty part."""
    from tqdm import tqdm  # the progress bar; only this command draws one

    if total is not None and total > MAX_BYTES:
        raise DataError(f"{label}: the server declares {total:,} bytes, over the {MAX_BYTES:,} treeqa downloads")
    limit, dropped = (total if total is not None else MAX_BYTES), None
    part.parent.mkdir(parents=True, exist_ok=True)
    with open(part, "ab" if start else "wb") as fh, tqdm(total=total, initial=start, unit="B", unit_scale=True,
                                                         unit_divisor=1024, desc=label, disable=not progress,
                                                         leave=False) as bar:
        try:
            while chunk := read(CHUNK):
                fh.write(chunk)
                bar.update(len(chunk))
                if fh.tell() > limit:
                    break
        except (OSError, HTTPException) as exc:  # HTTPException: IncompleteRead of a chunked body
            fh.write(getattr(exc, "partial", b""))
            dropped = exc
        size = fh.tell()
    if size > limit:
        part.unlink()
        raise DataError(f"{label}: the server sent more than {limit:,} bytes "
                        f"({'the size it declared' if total is not None else 'the most treeqa downloads'}): "
                        "refused, and the download deleted")
    if dropped is not None:
        if size == 0:
            part.unlink()
        raise DataError(f"{label}: the download stopped after {size:,} bytes ({dropped}); run the command again "
                        "to resume")


def _check_arrived(url: str, part: Path, start: int, total: int | None, label: str) -> None:
    """Refuse a body shorter than its headers declared (kept, to resume), or one that, asked to
    resume, repeats the file's first bytes (a server that restarted the file under a 206: deleted)."""
    size = part.stat().st_size
    if total is not None and size < total:
        raise DataError(f"{url}: the connection ended after {size:,} of {total:,} bytes; run the command again "
                        "to resume")
    if start and _repeats_start(part, start):
        part.unlink()
        raise DataError(f"{label}: asked to resume at byte {start:,}, the server sent the file from its start: the "
                        "partial download was deleted; run the command again to start over")


def _repeats_start(part: Path, start: int) -> bool:
    """Whether the bytes appended at `start` repeat the file's first ones."""
    n = min(start, part.stat().st_size - start, 256)
    with open(part, "rb") as fh:
        first = fh.read(n)
        fh.seek(start)
        return n >= 16 and fh.read(n) == first


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _lock_path() -> Path:
    return user_data_dir() / LOCK_FILE


def read_lock() -> dict[str, str]:
    """sha256.lock's pins ({url: sha256}); one that is torn is a one-line error naming it, since every
    later download is checked against it."""
    lock = _lock_path()
    if not lock.exists() and not lock.is_symlink():
        return {}
    try:
        entries = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _torn(lock, exc) from None
    if not isinstance(entries, dict) or not all(
            isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) for v in entries.values()):
        raise _torn(lock, "not an object of URL: sha256")
    return entries


def _torn(lock: Path, why: object) -> DataError:
    return DataError(f"{lock} is torn or not a lock file ({why}): it holds the sha256 of each first download that "
                     "has no published hash; mend it, or remove it (the next downloads are pinned afresh), and run "
                     "the command again")


def _pin(new: dict[str, str]) -> None:
    """Record first downloads' hashes: re-read and rewritten under a lock (another source's get may
    pin at once), through a temporary file of a unique name (never one someone else made) and a rename."""
    if not new:
        return
    lock = _lock_path()
    with _locked(lock.parent / ".staging" / PINS_LOCK):
        entries = {**read_lock(), **new}
        fd, temporary = tempfile.mkstemp(prefix=".sha256-", suffix=".tmp", dir=lock.parent)
        try:
            os.fchmod(fd, 0o644)  # as any file the user's data folder holds, not mkstemp's 0600
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(entries, indent=2, sort_keys=True) + "\n")
            os.replace(temporary, lock)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def _verify(remote: Remote, path: Path, pins: dict[str, str], ours: bool) -> str:
    """`path`'s sha256, once it is the pinned one or, none being pinned yet, once it parses whole
    as its kind. Else our own download is deleted, so the next run fetches afresh, not resumes it."""
    digest, expected = sha256_of(path), remote.sha256 or pins.get(remote.url)
    if expected is not None and digest != expected:
        where = "" if remote.sha256 else (f"; {_lock_path()} pinned it at its first download: if the file changed at "
                                          f"its source, remove the entry \"{remote.url}\" from it and run again")
        raise _refused(remote, path, ours, f"sha256 {digest} is not the pinned {expected} (from {remote.url})", where)
    if expected is None:
        try:
            check_whole(path, remote.kind)
        except DataError as exc:
            raise _refused(remote, path, ours, str(exc)) from None
    return digest


def _refused(remote: Remote, path: Path, ours: bool, why: str, then: str = "") -> DataError:
    """The one line refusing `path` (our own download deleted first)."""
    if ours:
        path.unlink(missing_ok=True)
    done = "the download was deleted and nothing was installed" if ours else "nothing was installed"
    return DataError(f"{remote.file_name}: {why}; {done}{then}")


def check_whole(path: Path, kind: str | None) -> None:
    """Refuse a file that is not whole as its kind ("json", "jsonl", "zip", "gzip", "bz2"; None:
    text): a web page a server sent in its place, or a body cut short with no size to say so."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if not head:
        raise DataError("the file is empty")
    if WEB_PAGE.match(head.removeprefix(b"\xef\xbb\xbf")):
        raise DataError(f"the server sent a web page, not the file ({_title(head)})")
    checks = {"json": _check_json, "jsonl": _check_jsonl, "zip": _check_zip,
              "gzip": lambda p: _check_stream(p, gzip.open), "bz2": lambda p: _check_stream(p, bz2.open)}
    if kind in checks:
        checks[kind](path)


def _title(head: bytes) -> str:
    """A web page's title, in printable characters, to say what the server sent."""
    found = re.search(rb"<title[^>]*>([^<]{1,200})", head, re.IGNORECASE)
    if not found:
        return "it has no title"
    title = " ".join(found.group(1).decode("utf-8", "replace").split())
    return "its title: " + "".join(c for c in title if c.isprintable())


def _check_json(path: Path) -> None:
    """Parse it whole, as the loaders will (each object dropped once parsed, to spare memory)."""
    try:
        json.loads(path.read_bytes(), object_pairs_hook=lambda pairs: None)
    except (ValueError, RecursionError) as exc:
        raise DataError(f"not whole JSON ({exc})") from None


def _check_jsonl(path: Path) -> None:
    """Parse the lines of its first and last WINDOW bytes: a body cut short ends mid-line."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(WINDOW)
        fh.seek(max(0, size - WINDOW))
        tail = fh.read()
    lines = head.split(b"\n")
    if size > WINDOW:
        lines.pop()  # the window may cut its last line
        ending = tail.rstrip(b"\r\n").split(b"\n")
        lines += ending[-1:] if len(ending) > 1 else []  # the file's last line, whole unless cut short
    for number, line in enumerate(lines, 1):
        try:
            if line.strip():
                json.loads(line)
        except (ValueError, RecursionError) as exc:
            where = f"line {number}" if number < len(lines) or size <= WINDOW else "its last line"
            raise DataError(f"not whole JSON lines ({where}: {exc})") from None


def _check_zip(path: Path) -> None:
    """Open it and read each member to its end (its CRC checked), refusing first what cannot be
    unpacked: an encrypted member, an unknown method, a size over MAX_BYTES."""
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                _check_member(info)
            declared, limit = sum(info.file_size for info in archive.infolist()), unpack_limit(path)
            if declared > limit:
                raise DataError(f"its members declare {declared:,} bytes, more than the {limit:,} a "
                                f"{path.stat().st_size:,}-byte zip may unpack to ({MAX_RATIO} times its size)")
            damaged = archive.testzip()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        raise DataError(f"not a whole zip ({exc})") from None
    if damaged is not None:
        raise DataError(f"not a whole zip (member {damaged} fails its CRC check)")


def _check_member(info: zipfile.ZipInfo) -> None:
    if info.flag_bits & 0x1:
        raise DataError(f"member {info.filename} is encrypted, and treeqa reads no passwords")
    if info.compress_type not in ZIP_METHODS:
        raise DataError(f"member {info.filename} is compressed with method {info.compress_type}, which Python's "
                        "zipfile cannot read")
    if info.file_size > MAX_BYTES:
        raise DataError(f"member {info.filename} declares {info.file_size:,} bytes, over the {MAX_BYTES:,} a file "
                        "unpacked from a download may be")


def _check_stream(path: Path, opener: Callable[..., BinaryIO]) -> None:
    """Decompress it to its end (a file cut short fails there)."""
    try:
        with opener(path, "rb") as src:
            _drain(src, limit=unpack_limit(path))
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"does not decompress whole ({exc})") from None


def unpack_limit(archive: Path) -> int:
    """The most a compressed download may unpack to: MAX_RATIO times its size (UNPACK_FLOOR at
    least), never over MAX_BYTES."""
    return min(MAX_BYTES, max(UNPACK_FLOOR, MAX_RATIO * archive.stat().st_size))


def _drain(src: BinaryIO, dst: BinaryIO | None = None, limit: int = MAX_BYTES) -> None:
    """Read `src` to its end (into `dst`, where given), refusing more than `limit`: a small
    compressed file can unpack to more than the disk holds."""
    total = 0
    while chunk := src.read(CHUNK):
        total += len(chunk)
        if total > limit:
            raise DataError(f"it decompresses to more than {limit:,} bytes, the most treeqa unpacks from it")
        if dst is not None:
            dst.write(chunk)


def _member(archive: zipfile.ZipFile, wanted: str) -> str:
    names = archive.namelist()
    if wanted in names:
        return wanted
    matches = [n for n in names if n.endswith(f"/{wanted}") and "__MACOSX" not in n]
    if len(matches) != 1:
        raise DataError(f"{'no' if not matches else 'more than one'} member named {wanted}")
    return matches[0]


@contextmanager
def _opened(remote: Remote, path: Path, member: str) -> Iterator[BinaryIO]:
    """`member` of the download at `path`, decompressed as `remote.unpack` says."""
    if remote.unpack == "zip":
        with zipfile.ZipFile(path) as archive, archive.open(_member(archive, member)) as src:
            yield src
    else:
        with {"gunzip": gzip.open, "bunzip2": bz2.open}.get(remote.unpack, open)(path, "rb") as src:
            yield src


def _unpack(remote: Remote, path: Path, into: Path) -> None:
    """Write each of `remote`'s files, from the download at `path`, under `into`."""
    for member, target in remote.files.items():
        out = into / target
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            with _opened(remote, path, member) as src, open(out, "wb") as dst:
                _drain(src, dst, unpack_limit(path) if remote.unpack else MAX_BYTES)
        except (DataError, zipfile.BadZipFile, OSError, EOFError, zlib.error, lzma.LZMAError, RuntimeError,
                NotImplementedError) as exc:
            raise DataError(f"cannot unpack {member or 'it'} ({exc})") from exc


def _unpack_or_drop(remote: Remote, path: Path, into: Path, ours: bool) -> None:
    """Unpack `remote`; a download that cannot be unpacked is deleted (of ours), not pinned."""
    try:
        _unpack(remote, path, into)
    except DataError as exc:
        raise _refused(remote, path, ours, str(exc)) from None


def _publish(staged: Path, final: Path) -> Path:
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, final)
    except OSError as exc:
        raise DataError(f"cannot install {final} ({exc})") from None
    return final
