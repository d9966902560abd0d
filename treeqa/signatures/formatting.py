"""How passages and search history are shown to the LM: one format everywhere."""

from __future__ import annotations

from collections.abc import Sequence

from treeqa.data.corpus import Passage


def format_passages(passages: Sequence[Passage], max_chars: int | None = None) -> list[str]:
    """One string per passage, "Title: text" (`Passage.as_text`), optionally cut to `max_chars` each."""
    return [p.as_text(max_chars) for p in passages]


def format_history(history: Sequence[tuple[str, str]]) -> str:
    """Search history as numbered (sub-question, evidence) pairs; "(none yet)" when empty."""
    if not history:
        return "(none yet)"
    lines = []
    for i, (query, evidence) in enumerate(history, start=1):
        lines.append(f"[{i}] Query: {query}\n    Evidence: {evidence or '(no evidence)'}")
    return "\n".join(lines)
