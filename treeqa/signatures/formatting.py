"""How passages and search history are shown to the LM: one format everywhere."""

from __future__ import annotations

from collections.abc import Sequence

from treeqa.data.corpus import Passage


def format_passages(passages: Sequence[Passage], max_chars: int | None = None) -> list[str]:
    """One string per passage, "Title: text", optionally cut to `max_chars` each."""
    out = []
    for p in passages:
        text = p.text if max_chars is None or len(p.text) <= max_chars else p.text[:max_chars].rsplit(" ", 1)[0] + " …"
        out.append(f"{p.title}: {text}")
    return out


def format_history(history: Sequence[tuple[str, str]]) -> str:
    """Search history as numbered (sub-question, evidence) pairs; "(none yet)" when empty."""
    if not history:
        return "(none yet)"
    lines = []
    for i, (query, evidence) in enumerate(history, start=1):
        lines.append(f"[{i}] Query: {query}\n    Evidence: {evidence or '(no evidence)'}")
    return "\n".join(lines)
