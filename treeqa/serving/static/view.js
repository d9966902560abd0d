// `treeqa view`: a finished run drawn from RUN (set by the page), question by question.
"use strict";
const { el } = TreeQA;
const summary = document.getElementById("summary");
const table = el("table", "summary");
const keys = ["n", "em", "em_ci", "f1", "recall@15", "lm_calls_per_q", "seconds_per_q", "failed_calls"];
table.appendChild(el("tr")).append(el("th", null, ""), ...keys.map((k) => el("th", null, k)));
for (const [label, s] of Object.entries(RUN.summary)) {
  if (!s || s.em === undefined) continue;
  table.appendChild(el("tr")).append(el("td", null, label), ...keys.map((k) => el("td", null, JSON.stringify(s[k] ?? "–"))));
}
summary.appendChild(table);
const paired = RUN.summary["compiled vs zero-shot"];
if (paired && paired.em) {
  summary.appendChild(el("p", null, `EM compiled - zero-shot: ${paired.em.diff} [${paired.em.ci}], `
    + `${paired.em.wins} won / ${paired.em.losses} lost, McNemar p=${paired.em.p_mcnemar}: ${paired.em.verdict}`));
}
const labels = Object.keys(RUN.runs);
const byId = labels.map((label) => new Map(RUN.runs[label].map((r) => [r.id, r])));
const first = RUN.runs[labels[0]];
for (const record of first) {
  const section = el("section", "question");
  const versions = byId.map((m) => m.get(record.id)).filter(Boolean);
  let verdict = "";
  if (versions.length === 2 && versions[0].em !== versions[1].em) verdict = versions[1].em > versions[0].em ? "won" : "lost";
  section.appendChild(el("h2", verdict, (verdict ? `[compiling ${verdict}] ` : "") + record.question));
  section.appendChild(el("p", "muted", "gold: " + (record.answers || []).join(" | ")));
  versions.forEach((r, i) => {
    section.appendChild(el("p", null, `${labels[i]}: ${r.prediction || "(no answer)"} · EM ${r.em} · ${r.lm_calls} calls`));
    const grid = el("div"); grid.style.display = "grid"; grid.style.gridTemplateColumns = "minmax(0,3fr) minmax(0,2fr)";
    grid.style.gap = "0.5rem";
    const tree = el("div"); tree.id = `tree-${i}-${record.id}`;
    const detail = el("div"); detail.id = `detail-${i}-${record.id}`;
    grid.append(tree, detail);
    section.appendChild(grid);
    new TreeQA.TreeView(tree, detail).drawTree(r.tree);
  });
  document.getElementById("questions").appendChild(section);
}
