"""GitHub-flavoured Markdown of the export document (``--agentrace-md``, ``$GITHUB_STEP_SUMMARY``, ``agentrace comment``).

Renders the same document as the JSON export (``report.json_export``), so the figures are the same in every
format. ``comment_body`` starts with ``COMMENT_MARKER`` (an HTML comment GitHub does not show) so a CI job can
find its earlier comment and update it instead of adding a new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agentrace.report.leaderboard import RACE_NOTE
from pytest_agentrace.report.limits import hits_line
from pytest_agentrace.report.stats_text import ratio_text
from pytest_agentrace.stats.verdict import FIXED, TARGET_TEXT

COMMENT_MARKER = "<!-- agentrace-report -->"
MAX_NOT_PASSED = 20


def _cell_text(value: Any) -> str:
    text = "-" if value is None or value == "" else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GFM pipe table; cell text is escaped (``|``, backslashes, newlines). Empty ``rows`` give a note."""
    if not rows:
        return "_(nothing recorded)_"
    from tabulate import tabulate

    return tabulate([[_cell_text(c) for c in row] for row in rows], headers=[_cell_text(h) for h in headers],
                    tablefmt="github", disable_numparse=True)


# -- number formatting shared with the HTML report --------------------------------------------------------


def interval(value: Any) -> tuple[float | None, float | None]:
    """``(lo, hi)`` from an interval given as ``[lo, hi]``, ``{"lo", "hi"}`` or None."""
    if isinstance(value, Mapping):
        return value.get("lo"), value.get("hi")
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return value[0], value[1]
    return None, None


def num(x: Any, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def with_ci(x: Any, ci: Any, fmt=num, **kw: Any) -> str:
    """``"x (lo–hi)"``, or ``x`` alone when the interval is undefined."""
    lo, hi = interval(ci)
    if x is None:
        return "-"
    if lo is None or hi is None:
        return fmt(x, **kw)
    return f"{fmt(x, **kw)} ({fmt(lo, **kw)}–{fmt(hi, **kw)})"


def used_tool(cell: Mapping[str, Any]) -> str:
    """``k/n`` runs whose tool calls matched the arm's ``uses`` regex; ``-`` when no run could tell."""
    known = cell.get("used_tool_known")
    if not known:
        return "-"
    return f"{cell.get('used_tool', 0)}/{known}"


def usd(x: Any) -> str:
    return "-" if x is None else f"${x:.4f}"


def tokens(x: Any) -> str:
    return "-" if x is None else f"{round(x):,}"


def target_text(doc: dict[str, Any]) -> str:
    """The inference target of an export's comparisons in words (``config.generalize``; ``fixed`` when absent)."""
    return TARGET_TEXT.get((doc.get("config") or {}).get("generalize") or FIXED, TARGET_TEXT[FIXED])


def comparison_fields(c: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of one ``cells.compare_arms`` entry (``ArmComparison.to_dict``) under short names: agent, case
    (the cases compared, joined), arm, baseline, ratio (relative cost), ci, verdict (the relative-cost verdict),
    provisional, runs / baseline_runs (valid runs), pass_arm / pass_base (pass rates), pass_verdict."""
    cases = c.get("cases") or []
    return {
        "agent": c.get("agent"), "case": ", ".join(cases) if len(cases) <= 3 else f"{len(cases)} cases", "arm": c.get("arm"),
        "baseline": c.get("baseline"), "ratio": c.get("relative_cost"), "ci": c.get("relative_cost_ci"),
        "verdict": c.get("cost_verdict"), "provisional": bool(c.get("provisional")), "runs": c.get("runs_arm"),
        "baseline_runs": c.get("runs_base"), "pass_arm": c.get("pass_rate_arm"), "pass_base": c.get("pass_rate_base"),
        "pass_verdict": c.get("pass_verdict"),
    }


def verdict_text(f: Mapping[str, Any]) -> str:
    v = f.get("verdict") or "-"
    return f"{v} (provisional)" if f.get("provisional") else v


# -- the report ---------------------------------------------------------------------------------------------


def leaderboard_rows(doc: Mapping[str, Any]) -> list[list[Any]]:
    return [[i, s["agent"], s["wins"], s["races"], pct(s["win_rate"]), num(s["mean_score"]), f"{s['passed']}/{s['runs']}",
             usd(s["mean_cost"]), num(s["mean_seconds"])] for i, s in enumerate(doc.get("leaderboard") or [], 1)]


LEADERBOARD_HEADERS = ["Rank", "Agent", "Wins", "Races", "Win %", "Mean score", "Passed", "Mean cost", "Mean time (s)"]
TASK_HEADERS = ["Task", "Agent", "Runs", "Passed", "Pass rate (95% CI)", "Score (mean ± sd)", "Tokens/run", "Cost/run", "Time (s)"]
TRIAL_HEADERS = ["Question", "Arm", "Agent", "Runs", "Passed", "Pass rate (95% CI)", "Tokens/run (95% CI)", "Turns", "Used tool", "Errors", "Time (s)"]
COMPARISON_HEADERS = ["Agent", "Cases", "Arm", "Baseline", "Runs", "Relative cost (95% CI)", "Cost verdict", "Pass rate", "Pass verdict"]


def task_rows(doc: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for c in doc.get("cells") or []:
        if c.get("kind") != "task":
            continue
        sd = c.get("score_sd")
        score = "-" if c.get("score_mean") is None else num(c["score_mean"]) + ("" if sd is None else f" ± {num(sd)}")
        rows.append([c["case"], c["agent"], c["runs"], f"{c['passed']}/{c['valid']}", with_ci(c.get("pass_rate"), c.get("pass_ci"), pct),
                     score, tokens(c.get("tokens_mean")), usd(c.get("cost_mean")), num(c.get("seconds_mean"))])
    return rows


def trial_rows(doc: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for c in doc.get("cells") or []:
        if c.get("kind") != "trial":
            continue
        rows.append([c["case"], c["arm"], c["agent"], c["runs"], f"{c['passed']}/{c['valid']}",
                     with_ci(c.get("pass_rate"), c.get("pass_ci"), pct), with_ci(c.get("tokens_mean"), c.get("tokens_ci"), tokens),
                     num(c.get("turns_mean")), used_tool(c), c.get("errors", 0), num(c.get("seconds_mean"))])
    return rows


def comparison_rows(doc: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for c in doc.get("comparisons") or []:
        f = comparison_fields(c)
        rows.append([f["agent"], f["case"] or "-", f["arm"], f["baseline"], f"{f['runs']} vs {f['baseline_runs']}",
                     with_ci(f["ratio"], f["ci"], ratio_text), verdict_text(f), f"{pct(f['pass_arm'])} vs {pct(f['pass_base'])}",
                     f["pass_verdict"] or "-"])
    return rows


def not_passed(doc: Mapping[str, Any]) -> list[str]:
    """One line per run that did not pass: ``run id: status: reason``."""
    return [f"{r['run_id']}: {r['status']}" + (f": {r['reason']}" if r.get("reason") else "")
            for r in doc.get("runs") or [] if r.get("status") != "passed"]


def headline(doc: Mapping[str, Any]) -> str:
    t = doc["totals"]
    parts = [f"{t['runs']} runs: {t['passed']} passed, {t['failed']} failed, {t['timeout']} timed out, {t['error']} errors"]
    hits = hits_line(doc.get("runs") or [])
    if hits:  # failed runs stopped at a resource limit
        parts.append(hits)
    s = doc.get("session") or {}
    if s.get("id"):
        parts.append(f"session {s['id']}")
    if s.get("git_sha"):
        parts.append(f"commit {s['git_sha'][:10]}")
    parts.append(f"pytest-agentrace {doc['product']['version']}")
    return " · ".join(parts)


def render(doc: Mapping[str, Any], title: str = "agentrace report", level: int = 2) -> str:
    """The whole report as Markdown: headline, leaderboard, tasks, trials, arm comparisons, Elo, runs that did
    not pass, and a footer naming the methods."""
    h = "#" * level
    out = [f"{h} {title}", "", headline(doc), ""]
    if doc.get("leaderboard"):
        out += [f"{h}# Leaderboard", "", md_table(LEADERBOARD_HEADERS, leaderboard_rows(doc)), "",
                f"_{RACE_NOTE}_", ""]
    rows = task_rows(doc)
    if rows:
        out += [f"{h}# Tasks", "", md_table(TASK_HEADERS, rows), ""]
    rows = trial_rows(doc)
    if rows:
        out += [f"{h}# Trials", "", md_table(TRIAL_HEADERS, rows), ""]
    rows = comparison_rows(doc)
    if rows:
        out += [f"{h}# Arms vs baseline", "", md_table(COMPARISON_HEADERS, rows), "",
                ("_Relative cost: tokens per run divided by the baseline arm's mean for the same case and agent; "
                 "`cheaper`/`dearer` only when the 95% interval excludes 1.00 and the exact permutation / sign-flip test agrees "
                 f"(p < 0.05). Target: {target_text(doc)}._"), ""]
    ratings = (doc.get("elo") or {}).get("ratings") or {}
    if ratings:
        elo_rows = [[a, num(r, 0)] for a, r in sorted(ratings.items(), key=lambda kv: (-kv[1], kv[0]))]
        out += [f"{h}# Elo", "", md_table(["Agent", "Rating"], elo_rows), ""]
    bad = not_passed(doc)
    if bad:
        out += [f"<details><summary>{len(bad)} run(s) did not pass</summary>", ""]
        out += [f"- {_cell_text(line)}" for line in bad[:MAX_NOT_PASSED]]
        if len(bad) > MAX_NOT_PASSED:
            out.append(f"- … and {len(bad) - MAX_NOT_PASSED} more (see the JSON export or run.json files)")
        out += ["", "</details>", ""]
    out.append(f"<sub>Pass-rate intervals: Wilson 95%. Token intervals: bootstrap 95% (seed {doc['config'].get('seed', 0)}). "
               f"Generated {doc['generated']}.</sub>")
    return "\n".join(out) + "\n"


def comment_body(doc: Mapping[str, Any]) -> str:
    """A PR-comment body: ``COMMENT_MARKER`` on the first line, then the report (``render``)."""
    return COMMENT_MARKER + "\n" + render(doc, title="agentrace results")
