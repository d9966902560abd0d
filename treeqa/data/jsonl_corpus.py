"""Your own corpus: one passage or document per JSONL line, read as a stream.

The layout retrieval toolkits use (pyserini, FlashRAG): `{"id": ..., "contents": ...}`, or
`{"id": ..., "title": ..., "text": ...}`; a `contents` whose first line is short is read as
"title\\ntext". Documents longer than `chunk_words` words are split into passages of about
that many words (DPR's Wikipedia passages are 100 words), each keeping the title, with ids
`<id>#<k>`. A bad line is a `DataError` naming the file and line; a repeated id is an error.
Plain or gzip-compressed files (`.jsonl.gz`) are read the same way, never all at once.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

from treeqa.data.loaders import DataError
from treeqa.data.passage import Passage, clean_whitespace

DEFAULT_CHUNK_WORDS = 100
_TITLE_LINE_WORDS = 20  # a first line of `contents` this short is a title


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def _title_and_text(record: dict, where: str) -> tuple[str, str]:
    if "contents" in record:
        contents = record["contents"]
        if not isinstance(contents, str):
            raise DataError(f"{where}: 'contents' must be text")
        head, sep, rest = contents.partition("\n")
        if sep and rest.strip() and len(head.split()) <= _TITLE_LINE_WORDS:
            return head.strip(), rest
        return "", contents
    title, text = record.get("title", ""), record.get("text")
    if not isinstance(text, str) or not isinstance(title, str):
        raise DataError(f"{where}: a passage needs 'contents', or 'text' (and 'title') as text")
    return title, text


def chunk(words: list[str], size: int) -> list[str]:
    """Passages of about `size` words; a short last piece joins the one before it."""
    pieces = [words[i:i + size] for i in range(0, len(words), size)] or [[]]
    if len(pieces) > 1 and len(pieces[-1]) < size // 2:
        tail = pieces.pop()
        pieces[-1] = pieces[-1] + tail
    return [" ".join(p) for p in pieces]


def read_jsonl_corpus(path: str | Path, chunk_words: int | None = DEFAULT_CHUNK_WORDS) -> Iterator[Passage]:
    """The passages of a JSONL corpus, in file order (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such corpus file")
    if chunk_words is not None and chunk_words < 10:
        raise DataError(f"chunk_words must be at least 10, got {chunk_words}")
    try:
        yield from _passages(path, chunk_words)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:  # a torn download or a file that only says .gz
        raise DataError(f"{path}: not a complete gzip file ({exc or type(exc).__name__}); "
                        "compress it again, or drop the .gz suffix if it is plain JSONL") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read the corpus ({exc.strerror or exc})") from None


def _passages(path: Path, chunk_words: int | None) -> Iterator[Passage]:
    seen: set[str] = set()
    with _open(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            where = f"{path}, line {lineno}"
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise DataError(f"{where}: not UTF-8 text ({exc.reason})") from exc
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise DataError(f"{where}: expected a JSON object, found {type(record).__name__}")
            doc_id = record.get("id", record.get("_id"))
            if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool) or str(doc_id).strip() == "":
                raise DataError(f"{where}: a passage needs an 'id' (text or a number)")
            doc_id = str(doc_id)
            if doc_id in seen:
                raise DataError(f"{where}: duplicate id {doc_id!r}")
            seen.add(doc_id)
            title, text = _title_and_text(record, where)
            title, words = clean_whitespace(title), text.split()
            if not words:
                continue
            if chunk_words is None or len(words) <= chunk_words:
                yield Passage(doc_id, title, " ".join(words))
                continue
            for k, piece in enumerate(chunk(words, chunk_words)):
                yield Passage(f"{doc_id}#{k}", title, piece)


def file_fingerprint(path: str | Path, chunk_words: int | None) -> str:
    """What decides a corpus's passages: the file's bytes and the chunking (streamed sha256)."""
    digest = hashlib.sha256(f"chunk_words={chunk_words}\n".encode())
    with Path(path).open("rb") as fh:
        while block := fh.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()[:16]
