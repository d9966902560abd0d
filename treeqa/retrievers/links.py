"""The corpus's paragraphs by the titles that running text names them by: a paragraph's links.

Why: in Wikipedia-built multi-hop sets the next hop is usually a paragraph whose title the
current one names ("... directed by Steven Spielberg" leads to "Steven Spielberg"), which is how
hyperlink-following retrievers find it. ToR's `expansion="linked"` follows these links without an
LM call; the path judge's `linked` feature reads the same relation (`title_key`).
"""

from __future__ import annotations

import re
import weakref
from collections import defaultdict
from collections.abc import Sequence

from treeqa.data.passage import Passage

MIN_KEY_CHARS = 3  # shorter titles ("Om", "U2"?) name too much running text by accident
_BUILT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_WORD = re.compile(r"\w+")


def title_key(title: str) -> str:
    """A title as it is named in running text: lower case, without a "(film)"-style qualifier."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip().lower()


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class TitleLinks:
    """Paragraphs by title key; `named_in(text)` finds the ones a text names, in order of mention.

    Titles and text are compared as runs of whole words ("AC/DC" is named by "ac dc" too), so a
    text is scanned by its word n-grams, never against every title."""

    def __init__(self, passages: Sequence[Passage]):
        by_key: dict[str, list[Passage]] = defaultdict(list)
        for p in passages:
            key = title_key(p.title)
            words = _words(key)
            if len(key) >= MIN_KEY_CHARS and words:
                by_key[" ".join(words)].append(p)
        self.by_key = dict(by_key)
        self.longest = max((k.count(" ") + 1 for k in self.by_key), default=0)

    def named_in(self, text: str, exclude: set[str] = frozenset()) -> list[Passage]:
        """The paragraphs whose title `text` names, first mention first, a longer title before a
        shorter one at the same word (ids in `exclude` left out)."""
        words, found, seen = _words(text), [], set(exclude)
        for start in range(len(words)):
            for n in range(min(self.longest, len(words) - start), 0, -1):
                for p in self.by_key.get(" ".join(words[start:start + n]), ()):
                    if p.id not in seen:
                        seen.add(p.id)
                        found.append(p)
        return found


def title_links(retriever) -> TitleLinks:
    """The links of a retriever's corpus (`retriever.passages`), built once per retriever."""
    passages = getattr(retriever, "passages", None)
    if passages is None:
        raise ValueError(f"{type(retriever).__name__} exposes no passages to follow links in")
    try:
        return _BUILT[retriever]
    except (KeyError, TypeError):
        links = TitleLinks(passages)
        try:
            _BUILT[retriever] = links
        except TypeError:  # not weak-referenceable: built again next time
            pass
        return links
