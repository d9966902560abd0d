"""The trace of a step-by-step search (Self-Ask, IRCoT, ITER-RETGEN, Hop, ReAct): one node a
step, in the node layout the page and `treeqa view` draw for a chain, sent to a listener (the
serving app's stream) as each step ends. Programs that use it declare `tree_shape = "steps"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from treeqa.data.passage import Passage
from treeqa.programs.common import emit


@dataclass
class StepTrace:
    """The steps of one question, in order; each step is a child of the one before."""

    question: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    retrieved: list[Passage] = field(default_factory=list)  # every passage found, in order, repeats kept

    def step(self, action: str, query: str | None = None, passages: Sequence[Passage] = (), note: str = "",
             failures: Sequence[dict] = ()) -> dict[str, Any]:
        """Record one step: `action` ("search" for a step that retrieved and goes on, "accept" for
        the last, "reject" for a step that failed or ran past the bound), the query it searched
        with, the passages it found and what the model wrote (`note`: an intermediate answer,
        a reasoning sentence, a generation)."""
        passages = list(passages)
        self.retrieved.extend(passages)
        node = {"node": len(self.nodes), "depth": len(self.nodes) + 1,
                "parent": len(self.nodes) - 1 if self.nodes else None, "action": action,
                "retrieved_by": query, "ids": [p.id for p in passages], "titles": [p.title for p in passages],
                "analysis": note, "failures": list(failures)}
        self.nodes.append(node)
        emit({"type": "node", "node": node,
              "passages": [{"id": p.id, "title": p.title, "text": p.text} for p in passages]})
        return node

    def distinct_retrieved(self) -> list[Passage]:
        """The passages found, first occurrence first: what recall@15 reads."""
        seen: dict[str, Passage] = {}
        for p in self.retrieved:
            seen.setdefault(p.id, p)
        return list(seen.values())

    def tree(self, **stats: Any) -> dict[str, Any]:
        """The tree record a prediction carries: the question, the steps and `stats`."""
        return {"question": self.question, "nodes": self.nodes, "stats": {"steps": len(self.nodes), **stats}}
