"""Text, Markdown and JSON renderings of the statistics report (``cells.StatsReport``), the snapshot
comparison table and the plan table. Tables via tabulate (imported inside functions); in ``text`` a ``width``
(characters) makes every table and line fit it (``report.fit``: cells wrap, the columns named in ``OPTIONAL``
drop, least important first); Markdown is never narrowed."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pytest_agentrace.report.fit import fit_lines, fit_table
from pytest_agentrace.report.numbers import fixed as _f
from pytest_agentrace.report.numbers import p_value as _p
from pytest_agentrace.report.numbers import pct as _pct
from pytest_agentrace.report.numbers import ratio as ratio_text
from pytest_agentrace.report.numbers import span
from pytest_agentrace.report.numbers import tokens as _tok
from pytest_agentrace.report.text import _display_path
from pytest_agentrace.stats.numerics import wilson_interval
from pytest_agentrace.stats.snapshot import closing_line
from pytest_agentrace.stats.verdict import TARGET_TEXT

FORMATS = ("text", "markdown", "json")
ARM_HEADERS = ["Arm", "Runs", "Correct (95% CI)", "Tokens/run (95% CI)", "Relative cost (95% CI)", "Verdict",
               "Cost p (BH p)", "Turns", "Used tool", "Seconds"]
PASS_HEADERS = ["Arm", "Pass rate", "Errors as failures", "Difference (Newcombe 95% CI)", "Boschloo p",
                "Verdict test p", "BH p", "Verdict", "Cohen's d"]
CASE_HEADERS = ["Case", "Arm", "Runs", "Tokens/run (95% CI)", "Relative cost (95% CI)", "p (Holm p)", "Verdict"]
RELIABILITY_HEADERS = ["Arm", "Cases", "Flipping cases", "pass@1", "pass@k", "pass^k"]
CLAIM_HEADERS = ["Agent", "Arm", "Claims", "False pass", "False fail", "Invalid"]
COMPARE_HEADERS = ["Agent", "Case", "Arm", "Passed (old -> new)", "Verdict", "Detail"]
# columns a table may leave out to fit a width, least important first (by table)
OPTIONAL = {
    "arm": ("Turns", "Used tool", "Seconds", "Cost p (BH p)"),
    "pass": ("Cohen's d", "Verdict test p", "Boschloo p", "BH p", "Errors as failures"),
    "case": ("p (Holm p)", "Runs"),
    "tasks": ("Errors", "Seconds", "pass@k / pass^k (k=runs)", "Tokens/run (95% CI)"),
    "races": ("Flipping tasks", "Consistency", "Reliability", "Tasks", "95% CI (Wilson)", "Elo"),
    "reliability": ("pass^k", "pass@k"),
    "compare": ("Detail",),
    "plan": ("Further tokens", "Further USD"),
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _p_bh(p: float | None, adjusted: float | None, error: float | None = None) -> str:
    """``"0.031 (0.062)"``: a verdict p-value and, in brackets, its adjusted value (Benjamini-Hochberg for the arm
    comparisons, Holm for the per-case ones); a Monte Carlo
    p-value carries its standard error (``"0.012±0.001 (0.024)"``)."""
    if p is None:
        return "-"
    mc = f"±{error:.1g}" if error else ""
    return f"{_p(p)}{mc} ({_p(adjusted)})"


def _ci(iv: Any, fmt=_f) -> str:
    """`` (lo-hi)`` for an ``Interval`` or a (lo, hi) pair (`` (lo to hi)`` when lo is negative); empty when undefined."""
    if iv is None:
        return ""
    lo, hi = (iv.lo, iv.hi) if hasattr(iv, "lo") else iv
    return span(lo, hi, fmt)


def _table(rows: list[list[Any]], headers: list[str], fmt: str, width: int | None = None,
           optional: str = "") -> list[str]:
    """A table in ``fmt``; in ``text`` narrowed to ``width`` (``report.fit``), dropping ``OPTIONAL[optional]``."""
    return fit_table(rows, headers, width if fmt == "text" else None, OPTIONAL.get(optional, ()), numparse=False)


def _heading(text: str, fmt: str, level: int = 3) -> list[str]:
    return [("#" * level + " " + text) if fmt == "markdown" else text]


def _verdict(c: Any) -> str:
    v = str(c.cost_verdict)
    if c.sequential:
        per = " per case" if len(c.sequential.get("cases") or ()) > 1 else ""
        fixed = c.sequential.get("fixed_verdict")
        also = ""
        if fixed and fixed != v:  # capped: the looks before the cap spent part of alpha
            also = f"; these runs alone read {fixed}, but earlier looks spent part of alpha"
        return f"{v} ({c.sequential['state']} at {c.sequential['n']} runs{per}{also})"
    return v + (" (provisional)" if c.provisional else "") + _disagreement(c)


def _disagreement(c: Any) -> str:
    """Why a comparison whose interval excludes 1.00 is still ``no clear difference``: its exact test did not agree
    (a verdict needs both). A test whose smallest possible p (``cost_p_min``) is at or above 0.05 says so: with n
    cases a sign-flip test's two-sided p cannot go below 2 / 2**n (0.5 at 2 cases: add cases); a stratified
    permutation test's not below 2 / prod C(2n, n) (2 runs per arm in 2 cases: 2/36 = 0.056: add runs)."""
    iv = c.relative_cost_ci
    if str(c.cost_verdict) != "no clear difference" or c.cost_p is None or iv is None or iv.lo is None or iv.hi is None:
        return ""
    if not (iv.lo > 1.0 or iv.hi < 1.0):
        return ""
    text = f" (interval excludes 1.00, {c.cost_test} p={_p(c.cost_p)}"
    n = len(c.cases)
    floor = getattr(c, "cost_p_min", None)
    if c.cost_test == "sign-flip" and 2 / 2**n >= 0.05:
        text += f"; with {n} cases p cannot go below {2 / 2**n:.2g}: add cases"
    elif floor is not None and floor >= 0.05:
        where = f" in {n} cases" if n > 1 else ""
        text += f"; with {c.runs_per_case} runs per arm{where} p cannot go below {floor:.2g}: add runs"
    return text + ")"


def correct_text(passed: int, valid: int, ci: tuple[float, float] | None) -> str:
    return f"{passed}/{valid}" + ("" if not valid or ci is None else f" {_pct(passed / valid)}{_ci(ci, _pct)}")


def report_lines(report: Any, fmt: str = "text", width: int | None = None, footer: bool = True) -> list[str]:
    """Lines of the statistics report in ``fmt`` (``text`` or ``markdown``; use ``render`` for ``json``), in
    ``text`` no wider than ``width`` characters (None: no limit).

    Only what adds to the per-task / per-trial tables printed before it: per agent with two or more arms, the arm
    table, pass rate vs baseline, spread and runs needed, tokens by case (two or more cases), reliability and
    claims; for single-arm files (task races) the per-cell table and the coderace statistics when some cell has
    two or more valid runs (reps), else one line of Elo ratings; the method footer when anything was shown (and
    ``footer``: ``-q`` leaves it out).
    """
    lines: list[str] = []
    cells_by = defaultdict(list)
    for c in report.cells:
        cells_by[(c.kind, c.source, c.agent)].append(c)
    comps = {(c.kind, c.source, c.agent, c.arm): c for c in report.comparisons}
    case_comps = {(c.kind, c.source, c.agent, c.arm, c.cases[0]): c for c in report.case_comparisons}
    spread = {(s.kind, s.agent): s for s in report.spread}
    rel = {(r.kind, r.agent, r.arm): r for r in report.reliability}
    arm_toks = {(t.kind, t.source, t.agent, t.arm): t for t in getattr(report, "arm_tokens", ())}
    single_arm = []
    for (kind, source, agent), cs in sorted(cells_by.items()):
        arms = sorted({c.arm for c in cs})
        if len(arms) == 1:
            single_arm += cs
            continue
        base = next((c.baseline for c in report.comparisons if (c.kind, c.source, c.agent) == (kind, source, agent)), None)
        lines += _arm_block(kind, source, agent, arms, base, cs, comps, case_comps, fmt, arm_toks, width)
        if (kind, agent) in spread:
            lines.append("spread: " + spread[(kind, agent)].sentence())
        rrows = []
        for arm in arms:
            r = rel.get((kind, agent, arm))
            if r is not None:
                k = max(int(x) for x in r.pass_at_k)
                rrows.append([arm, r.cases, f"{r.flipping}/{r.cases} ({_pct(r.flip_rate)})", _f(r.pass_at_k["1"]), f"{_f(r.pass_at_k[str(k)])} (k={k})",
                              f"{_f(r.pass_hat_k[str(k)])} (k={k})"])
        if rrows:
            lines += ["reliability per case (unbiased pass@k / pass^k, mean over cases):"]
            lines += _table(rrows, RELIABILITY_HEADERS, fmt, width, "reliability")
        lines += _claims(cs, fmt, width)
        lines.append("")
    repeated = [c for c in single_arm if c.valid >= 2]
    if repeated:
        lines += _tasks_block(repeated, fmt, width)
    lines += _claims([c for c in single_arm if c.valid < 2], fmt, width)
    if report.races and repeated:
        flips = {r.agent: r for r in report.reliability if r.kind == "task"}
        lines += _heading("races on task files (coderace statistics)", fmt)
        rows = [[s.agent, s.tasks, s.runs, "-" if s.score_mean is None else f"{s.score_mean:.1f}" + ("" if s.score_sd is None else f" ± {s.score_sd:.1f}"),
                 _ci(s.score_ci, lambda x: f"{x:.1f}").strip(" ()") or "-", _f(s.consistency), _pct(s.reliability),
                 f"{flips[s.agent].flipping}/{flips[s.agent].cases}" if s.agent in flips else "-",
                 f"{s.wins}/{s.races}", _pct(s.win_rate), "-" if s.elo is None else f"{s.elo:.0f}"] for s in report.races]
        lines += _table(rows, ["Agent", "Tasks", "Runs", "Score mean ± sd", "95% CI (Wilson)", "Consistency", "Reliability", "Flipping tasks",
                               "Wins/races", "Win rate", "Elo"], fmt, width, "races")
        lines.append("wins need a mean score more than 1 point above every other agent's (ties are not wins); reliability: runs without "
                     "timeout or agent exit error; Elo: 1500 start, K 32, draw within 1 point, one simultaneous update per race.")
        lines.append("")
    elif any(s.races for s in report.races):
        ranked = sorted((s for s in report.races if s.elo is not None), key=lambda s: (-s.elo, s.agent))
        lines.append("Elo over these races: " + ", ".join(f"{s.agent} {s.elo:.0f}" for s in ranked)
                     + " (1500 start, K 32, draw within 1 point; use --agentrace-reps N for score intervals and win rates)")
    if footer and lines and lines != [""]:
        lines += footer_lines(report, fmt)
    return fit_lines(lines, width) if fmt == "text" else lines


def _arm_block(kind, source, agent, arms, base, cs, comps, case_comps, fmt, arm_toks, width=None) -> list[str]:
    lines = _heading(f"{kind} {_display_path(source)} - agent {agent}" + (f" (baseline arm: {base})" if base else ""), fmt)
    rows = []
    by_arm: dict[str, list[Any]] = defaultdict(list)
    for c in cs:
        by_arm[c.arm].append(c)
    prows = []
    for arm in arms:
        group = by_arm[arm]
        valid, passed = sum(c.valid for c in group), sum(c.passed for c in group)
        runs = sum(c.runs for c in group)

        toks = [c for c in group if c.tokens_mean is not None]
        tok_text = "-"
        pooled = arm_toks.get((kind, source, agent, arm))
        if len(toks) == 1:  # one case (or only one with known tokens: said so)
            tok_text = _tok(toks[0].tokens_mean) + _ci(toks[0].tokens_ci, _tok) + (f" ({toks[0].case} only)" if len(group) > 1 else "")
        elif pooled is not None and pooled.mean is not None:  # mean over cases, cluster bootstrap interval
            tok_text = _tok(pooled.mean) + _ci(pooled.ci, _tok)
        comp = comps.get((kind, source, agent, arm))
        if arm == base:
            rel, verdict, cost_p = "1.00", "baseline", "-"
        elif comp is not None:
            rel, verdict, cost_p = (ratio_text(comp.relative_cost) + _ci(comp.relative_cost_ci, ratio_text), _verdict(comp),
                                    _p_bh(comp.cost_p, comp.cost_p_adj, comp.cost_p_error))
        else:
            rel, verdict, cost_p = "-", "-", "-"
        turns = [c.turns_mean for c in group if c.turns_mean is not None]
        used_known = sum(c.used_tool_known for c in group)
        secs = [c.seconds_mean for c in group if c.seconds_mean is not None]
        rows.append([arm, f"{valid}" + (f" (+{_plural(runs - valid, 'error')})" if runs > valid else ""), correct_text(passed, valid, wilson_interval(passed, valid)), tok_text, rel, verdict, cost_p,
                     _f(sum(turns) / len(turns), 1) if turns else "-", f"{sum(c.used_tool for c in group)}/{used_known}" if used_known else "-",
                     _f(sum(secs) / len(secs), 1) if secs else "-"])
        if comp is not None:
            errs = comp.errors_arm + comp.errors_base
            prows.append([arm, f"{_pct(comp.pass_rate_arm)} vs {_pct(comp.pass_rate_base)}",
                          f"{_pct(comp.pass_rate_arm_errors_as_failures)} vs {_pct(comp.pass_rate_base_errors_as_failures)}" + (f" ({_plural(errs, 'error')})" if errs else ""),
                          (f"{comp.pass_diff:+.2f}" if comp.pass_diff is not None else "-") + _ci(comp.pass_diff_ci, lambda x: f"{x:+.2f}"),
                          _p(comp.boschloo_p), f"{comp.pass_test} {_p(comp.pass_p)}", _p(comp.pass_p_adj), str(comp.pass_verdict),
                          "-" if comp.cohens_d is None else f"{comp.cohens_d:+.2f}"])
    lines += _table(rows, ARM_HEADERS, fmt, width, "arm")
    if prows:
        lines.append("pass rate vs baseline (errors excluded | errors as failures):")
        lines += _table(prows, PASS_HEADERS, fmt, width, "pass")
    crow = []
    if len({c.case for c in cs}) < 2:  # one case: the arm table above already says it all
        return lines
    for c in sorted(cs, key=lambda c: (c.case, c.arm)):
        comp = case_comps.get((kind, source, agent, c.arm, c.case))
        rel = "1.00" if c.arm == base else (ratio_text(comp.relative_cost) + _ci(comp.relative_cost_ci, ratio_text) if comp else "-")
        crow.append([c.case, c.arm, c.valid, _tok(c.tokens_mean) + _ci(c.tokens_ci, _tok), rel,
                     _p_bh(comp.cost_p, comp.cost_p_adj, comp.cost_p_error) if comp else "-", _verdict(comp) if comp else ("baseline" if c.arm == base else "-")])
    lines.append("tokens by case:")
    lines += _table(crow, CASE_HEADERS, fmt, width, "case")
    return lines


def _tasks_block(cs, fmt, width=None) -> list[str]:
    """The per-cell table of single-arm cells: task races, and trials of which one arm ran (``--agentrace-arm``, a
    stopped session): those are named by question and arm, not as tasks."""
    trials = any(c.kind != "task" for c in cs)
    what = ("tasks and questions", "Case") if trials and any(c.kind == "task" for c in cs) else \
        ("questions", "Question") if trials else ("tasks", "Task")
    lines = _heading(f"{what[0]}: pass rate and reliability per {what[1].lower()}{', arm' if trials else ''} and agent", fmt)
    rows = []
    for c in sorted(cs, key=lambda c: (c.source, c.case, c.agent)):
        k = str(c.valid)
        rows.append([c.case + (f" [{c.arm}]" if trials and c.kind != "task" else ""), c.agent, c.valid, correct_text(c.passed, c.valid, c.pass_ci),
                     f"{_f(c.pass_at_k.get(k))} / {_f(c.pass_hat_k.get(k))}" if c.valid >= 2 else "-",
                     _tok(c.tokens_mean) + _ci(c.tokens_ci, _tok),
                     "-" if c.score_mean is None else f"{c.score_mean:.1f}" + ("" if c.score_sd is None else f" ± {c.score_sd:.1f}"),
                     _f(c.seconds_mean, 1), c.errors])
    lines += _table(rows, [what[1], "Agent", "Runs", "Passed (95% CI)", "pass@k / pass^k (k=runs)", "Tokens/run (95% CI)",
                           "Score mean ± sd", "Seconds", "Errors"], fmt, width, "tasks")
    return lines + _claims(cs, fmt, width) + [""]


def _claims(cs, fmt, width=None) -> list[str]:
    claims = [c for c in cs if c.claims]
    if not claims:
        return []
    by_arm: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for c in claims:
        a = by_arm[(c.agent, c.arm)]
        a[0] += c.claims
        a[1] += c.false_pass
        a[2] += c.false_fail
        a[3] += c.claims_invalid
    rows = [[agent, arm, *v] for (agent, arm), v in sorted(by_arm.items())]
    return ["verification claims:"] + _table(rows, CLAIM_HEADERS, fmt, width)


def footer_lines(report: Any, fmt: str = "text") -> list[str]:
    f = report.footer
    multiple = len(report.comparisons) + len(report.case_comparisons) > 1
    target = f.get("target_text")
    return [
        *([f"target: {target}."] if target else []),
        f"method: {f['method']}.",
        f"seed {f['seed']}, {f['resamples']:,} resamples; {_plural(f['cases'], 'case')}, up to {_plural(f['reps'], 'rep')}, "
        f"{_plural(f['runs'], 'run')}, {_plural(f['errors'], 'infrastructure error')} (excluded), "
        + (f"{f['stopped']} stopped in a race (excluded), " if f.get("stopped") else "")
        + f"{_plural(f['tokens_unknown'], 'run')} with unknown tokens (excluded from token figures)"
        + ("; BH p = Benjamini-Hochberg adjusted over the arm-vs-baseline comparisons together (false-discovery rate, "
           "shown for reading; their verdicts rest on their own p); Holm p = Holm adjusted over the per-case comparisons "
           "of each arm per metric (per-case verdicts are decided on it: family-wise error 5% per arm and metric)."
           if multiple else "."),
    ]


def render(report: Any, fmt: str = "text", width: int | None = None) -> str:
    """The whole report as one string in ``fmt`` (``text``, ``markdown`` or ``json``); ``text`` no wider than
    ``width`` characters (None: no limit)."""
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2, sort_keys=True)
    return "\n".join(report_lines(report, fmt, width)).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------- snapshot, plan


def _gate_p(adjusted: dict[str, float]) -> str:
    return ", ".join(f"{v} {p:.3g}" for v, p in adjusted.items()) or "-"


def compare_lines(rows: Sequence[Any], fmt: str = "text", width: int | None = None, family: Any = None,
                  failed: int | None = None) -> list[str]:
    """The snapshot comparison table (agent, case, arm, passed old -> new, verdict, detail) and its closing line,
    in ``text`` no wider than ``width`` characters. With a ``verdict.GateFamily`` (``family``: the verdict gates in
    force) a column ``Gate p (Holm)`` gives each row's adjusted p per gated verdict, and a last line how many tests
    the gates looked at and at what family-wise rate (``failed``: how many failed)."""
    holm = family is not None and family.tests
    summary = [family.summary(failed)] if family is not None and failed is not None else []
    if fmt == "json":
        doc: dict[str, Any] = {"rows": [r.to_dict() for r in rows], "summary": closing_line(rows)}
        if family is not None:
            doc["gate"] = {"mode": family.mode, "rate": family.rate, "tests": len(family.tests), "summary": (summary or [None])[0],
                           "adjusted": [family.adjusted("row", i) for i in range(len(rows))]}
        return [json.dumps(doc, indent=2)]
    headers = list(COMPARE_HEADERS)
    table = [[r.agent, r.case, r.arm, r.passed_text(), str(r.verdict), r.detail] for r in rows]
    if holm:
        headers.insert(5, "Gate p (Holm)" if family.mode == "holm" else "Gate p (raw)")
        for i, row in enumerate(table):
            adj = family.adjusted("row", i)
            row.insert(5, _gate_p(adj if family.mode == "holm" else {t.metric: t.p for t in family.tests
                                                                       if t.source == "row" and t.index == i}))
    lines = _table(table, headers, fmt, width, "compare") + [closing_line(rows)] + summary
    return fit_lines(lines, width) if fmt == "text" else lines


PLAN_NOTE = ("token totals mean different things for different agents (what counts as input, cache reads and reasoning "
             "tokens differs by CLI): compare spend within an agent, not across agents")


def plan_lines(rows: Sequence[Any], fmt: str = "text", priced: bool = False, width: int | None = None) -> list[str]:
    """The ``agentrace plan --results`` table, in ``text`` no wider than ``width`` characters."""
    if fmt == "json":
        return [json.dumps({"rows": [r.to_dict() for r in rows], "note": PLAN_NOTE}, indent=2)]
    headers = ["Agent", "Case", "Arm", "Runs/arm", "Relative cost (95% CI)", "State", "Further runs/arm", "Further tokens"]
    if priced:
        headers.append("Further USD")
    table = []
    for r in rows:
        row = [r.agent, r.case, r.arm, r.runs, ratio_text(r.relative_cost) + _ci(r.relative_cost_ci, ratio_text), r.state_text(),
               "-" if r.more_runs is None else r.more_runs, _tok(r.further_tokens)]
        if priced:
            row.append("-" if r.further_usd is None else f"{r.further_usd:.2f}")
        table.append(row)
    targets = sorted({getattr(r, "target", "fixed") for r in rows})
    many = any(len(getattr(r, "cases", ())) > 1 for r in rows)
    extra = [f"target: {TARGET_TEXT[t]}." for t in targets] if many else []
    per_case = ["runs per arm are counted per case (the fewest of any case and side)."] if many else []
    lines = _table(table, headers, fmt, width, "plan") + extra + per_case + [f"note: {PLAN_NOTE}."]
    return fit_lines(lines, width) if fmt == "text" else lines
