"""Reports of runs as Markdown (summary rows with intervals, paired comparisons, the data line)."""

from __future__ import annotations

from typing import Any

from treeqa.evaluation.stats import questions_needed


def _with_ci(summary: dict[str, Any], key: str) -> str:
    value = summary.get(key, "–")
    ci = summary.get(f"{key}_ci")
    return f"{value} [{ci[0]}, {ci[1]}]" if ci else str(value)


def markdown_table(rows: dict[str, dict[str, Any]]) -> str:
    """Rows of summary figures (label -> summary) as a Markdown table; EM and F1 carry their
    95% bootstrap intervals."""
    columns = ["n", "em", "f1", "recall@15", "answer_hit@15", "lm_calls_per_q", "prompt_tokens_per_q",
               "completion_tokens_per_q", "seconds_per_q", "failed_calls", "errors"]
    headers = {"em": "em [95% CI]", "f1": "f1 [95% CI]"}
    lines = ["| program | " + " | ".join(headers.get(c, c) for c in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for label, summary in rows.items():
        cells = [_with_ci(summary, c) if c in headers else str(summary.get(c, "–")) for c in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def seconds_table(rows: dict[str, dict[str, Any]]) -> str:
    """Where each program's seconds a question go (label -> summary): the LM's, by predictor (the
    embedded engines' own clocks), what lies outside it (retrieval, the judge, parsing:
    `overhead_pct` of the wall clock), and the tokens read and written."""
    lines = ["| program | s a question | LM s by predictor | outside the LM | prompt / generated tokens |",
             "|---|---|---|---|---|"]
    for label, summary in rows.items():
        seconds = summary.get("seconds_per_q")
        by = summary.get("lm_seconds_per_q_by_predictor") or {}
        split = ", ".join(f"{name} {value}" for name, value in sorted(by.items(), key=lambda kv: -kv[1])) or "–"
        pct = summary.get("overhead_pct")
        outside = f"{round(seconds * pct / 100, 2)} s ({pct}%)" if seconds is not None and pct is not None else "–"
        tokens = f"{summary.get('prompt_tokens_per_q', '–')} / {summary.get('completion_tokens_per_q', '–')}"
        lines.append(f"| {label} | {seconds if seconds is not None else '–'} | {split} | {outside} | {tokens} |")
    return "\n".join(lines)


def comparison_table(comparisons: dict[str, dict[str, Any]]) -> str:
    """Paired comparisons (label "A vs B" -> `stats.compare_records`) as a Markdown table; beside
    each EM verdict, the questions a difference of that size needs (`stats.questions_needed`)."""
    lines = ["| comparison | n | EM diff [95% CI] | won / lost / tied | McNemar p | EM verdict "
             "| questions for this EM diff (80% power) | F1 diff [95% CI] "
             "| F1 verdict | EM A / B where both saw all gold (n) [95% CI of A - B], p: verdict "
             "| EM A / B where only A saw all gold (n) [95% CI], p: verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, c in comparisons.items():
        em, f1 = c["em"], c.get("f1")
        f1_cells = (f"{f1['diff']:+.2f} [{f1['ci'][0]:+.2f}, {f1['ci'][1]:+.2f}] | {f1['verdict']}" if f1 else "– | –")
        groups = [_group_cell(c.get(name)) for name in ("em_given_all_gold", "em_where_only_a_saw_all_gold")]
        lines.append(f"| {label} | {c['n']} | {em['diff']:+.2f} [{em['ci'][0]:+.2f}, {em['ci'][1]:+.2f}] | "
                     f"{em['wins']} / {em['losses']} / {em['ties']} | {em['p_mcnemar']:.3g} | {em['verdict']} | "
                     f"{_questions_needed(em) or '–'} | {f1_cells} | {' | '.join(groups)} |")
    return "\n".join(lines)


def _questions_needed(em: dict) -> int | None:
    """The questions an EM difference of this size needs: recorded, or (comparisons recorded before
    it was) from the counts won, lost and tied."""
    if "questions_needed" in em:
        return em["questions_needed"]
    return questions_needed(em["wins"], em["losses"], em["wins"] + em["losses"] + em["ties"])


def _group_cell(group: dict | None) -> str:
    """EM of A and B on a group of the compared questions (`stats.compare_records`), paired."""
    if not group:
        return "–"
    return (f"{group['a']} / {group['b']} ({group['n']}) [{group['ci'][0]:+.2f}, {group['ci'][1]:+.2f}]"
            + (f", p={group['p_mcnemar']:.3g}: {group['verdict']}" if "p_mcnemar" in group else ""))


def data_line(data: dict[str, str]) -> str:
    """The questions and corpus of a run, in one line for reports."""
    corpus = f"; corpus: {data['corpus']} ({data['retriever']})" if "corpus" in data else ""
    return f"questions: {data['questions']} [{data['split']}]{corpus}"

