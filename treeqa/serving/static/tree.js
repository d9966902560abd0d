// Drawing a treeqa search tree: nodes (Tree / Chain of Reviews, and the step-by-step baselines' steps) or beam states.
// Used by the live page (steps arrive one by one) and by `treeqa view` (whole trees at once).
// A tree is drawn as nested lists; each node is a button coloured by what happened to it,
// and clicking one shows its paragraph or evidence in `detail`.
"use strict";

const TreeQA = (() => {
  const ACTIONS = ["accept", "search", "reject", "pruned"];

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function clip(text, n) {
    text = String(text || "");
    return text.length > n ? text.slice(0, n - 1) + "…" : text;
  }

  class TreeView {
    // container: where the tree goes; detail: where a clicked node's content goes
    constructor(container, detail) {
      this.container = container;
      this.detail = detail;
      this.items = new Map(); // key -> {li, button, data, children (ul)}
      this.container.replaceChildren();
      this.root = el("ul", "tree");
      this.container.appendChild(this.root);
    }

    listFor(parentKey) {
      const parent = parentKey === null || parentKey === undefined ? null : this.items.get(parentKey);
      if (!parent) return this.root;
      if (!parent.children) {
        parent.children = el("ul");
        parent.li.appendChild(parent.children);
      }
      return parent.children;
    }

    put(key, parentKey, label, cls, data, show) {
      let item = this.items.get(key);
      if (!item) {
        const li = el("li");
        const button = el("button", "node");
        button.type = "button";
        button.addEventListener("click", () => this.select(key));
        li.appendChild(button);
        this.listFor(parentKey).appendChild(li);
        item = { li, button, children: null };
        this.items.set(key, item);
      }
      item.data = data;
      item.show = show;
      item.button.className = "node " + cls;
      item.button.dataset.key = key;
      item.button.replaceChildren(...label);
      return item;
    }

    select(key) {
      for (const item of this.items.values()) item.button.classList.remove("selected");
      const item = this.items.get(key);
      if (!item) return;
      item.button.classList.add("selected");
      if (this.detail) this.detail.replaceChildren(...item.show());
    }

    // Tree / Chain of Reviews: one node event {node, passages}
    addReviewNode(node, passages) {
      const known = this.items.get("n" + node.node);
      if ((!passages || !passages.length) && known && known.passages) passages = known.passages; // a redraw keeps them
      const action = ACTIONS.includes(node.action) ? node.action : "pending";
      const isRoot = node.id === null && node.ids === undefined && node.depth === 0;
      const title = isRoot ? "question" : (node.title || (node.titles || []).slice(-1)[0] || `turn ${node.depth}`);
      const label = [el("span", "badge", isRoot ? "root" : action), el("span", "title", clip(title, 60))];
      if (node.expanded && node.query) label.push(el("span", "query", "→ " + clip(node.query, 80)));
      const show = () => {
        const out = [el("h3", null, isRoot ? "The question" : title)];
        if (node.retrieved_by) out.push(el("p", "muted", "retrieved by: " + node.retrieved_by));
        if (!isRoot) out.push(el("p", "verdict", `action: ${node.action} · relevant: ${node.relevant} · sufficient: ${node.sufficient}`));
        if (node.reasoning) out.push(el("p", null, "reasoning: " + node.reasoning));
        if (node.analysis) out.push(el("p", "analysis", "analysis: " + node.analysis));
        if (node.query && node.expanded) out.push(el("p", null, "next query: " + node.query));
        for (const p of passages || []) {
          const block = el("div", "passage");
          block.append(el("strong", null, p.title), el("p", null, p.text));
          out.push(block);
        }
        for (const f of node.failures || []) out.push(el("p", "failure", `failed: ${f.where}: ${f.error}`));
        return out;
      };
      const parent = node.parent === null || node.parent === undefined ? null : "n" + node.parent;
      const item = this.put("n" + node.node, isRoot ? null : parent, label, "review " + (isRoot ? "root" : action),
        node, show);
      item.passages = passages;
    }

    // Beam search: one state event {state}
    addState(state) {
      const sub = (state.sub_questions || []).slice(-1)[0];
      const label = [el("span", "badge", state.status), el("span", "title", clip(sub || "no sub-question", 60))];
      if (state.answer) label.push(el("span", "query", `${clip(state.answer, 40)} · ${Number(state.confidence).toFixed(2)}`));
      const show = () => {
        const out = [el("h3", null, sub ? "Sub-question: " + sub : "Seed: the question itself")];
        out.push(el("p", "verdict", `answer: ${state.answer || "–"} · confidence ${state.confidence} · ${state.status}`));
        (state.sub_questions || []).forEach((q, i) => {
          const block = el("div", "passage");
          block.append(el("strong", null, q), el("p", null, (state.evidences || [])[i] || "(no evidence)"));
          out.push(block);
        });
        for (const p of state.passages || []) out.push(el("p", "muted", "passage: " + p.title));
        for (const f of state.failures || []) out.push(el("p", "failure", `failed: ${f.where}: ${f.error}`));
        return out;
      };
      const parent = state.parent === null || state.parent === undefined ? null : "s" + state.parent;
      this.put("s" + state.id, parent, label, "state " + state.status, state, show);
    }

    step(event) {
      if (event.type === "node") this.addReviewNode(event.node, event.passages);
      else if (event.type === "state") this.addState(event.state);
    }

    // A finished tree (from a response or a run record), drawn whole
    drawTree(tree) {
      if (!tree) return;
      if (tree.states) tree.states.forEach((s) => this.addState(s));
      else (tree.nodes || []).forEach((n) => this.addReviewNode(n, []));
      this.highlight(tree);
    }

    // The path to the final answer: ToR's accepted paths, or the beam's best state and its ancestors
    highlight(tree) {
      if (!tree) return;
      const mark = (key) => {
        while (key && this.items.has(key)) {
          const item = this.items.get(key);
          item.button.classList.add("on-path");
          const parent = item.data.parent;
          key = parent === null || parent === undefined ? null : key[0] + parent;
        }
      };
      if (tree.states) {
        if (tree.best !== null && tree.best !== undefined) mark("s" + tree.best);
      } else {
        (tree.nodes || []).filter((n) => n.action === "accept").forEach((n) => mark("n" + n.node));
      }
    }

    count() { return this.items.size; }
  }

  // Read a text/event-stream body from fetch(): calls onEvent(name, data) per event
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message", data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (data) onEvent(name, JSON.parse(data));
      }
    }
  }

  return { TreeView, readEvents, el, clip };
})();
