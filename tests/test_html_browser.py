"""The HTML report of the acceptance session in a real headless Chromium (Debian's, driven by Playwright):
it loads with no console errors and no network request, tables sort, the theme toggles (and stays toggled),
the outcome toggles and the filter box show only the runs asked for, run rows expand to their escaped details
(the transcript turn by turn, links to the run's files), the page is no wider than the window at 1280 and at
390 px (chart cards included), and screenshots are saved under test-artifacts/ (report-1280.png, report-390.png,
...).

Needs ``bash scripts/install-browser.sh`` (chromium from apt, playwright from PyPI; no browser download)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import unquote

import numpy  # noqa: F401  (imported once here: pytester's in-process runs cannot re-import numpy's C extension)
import pytest
import scipy.stats  # noqa: F401
from helpers.report import make_acceptance_project

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = os.environ.get("AGENTRACE_CHROMIUM", "/usr/bin/chromium")


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser test needs Playwright's Python package: run `bash scripts/install-browser.sh`")
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: run `bash scripts/install-browser.sh` (or set AGENTRACE_CHROMIUM)")
    return sync_playwright


@pytest.fixture
def report(pytester: pytest.Pytester, bin_dir: Path) -> Path:
    make_acceptance_project(pytester.path, bin_dir)
    res = pytester.runpytest("--agentrace", "--agentrace-reps", "3", "--agentrace-no-save", "--agentrace-html", "report.html")
    res.assert_outcomes(passed=18, failed=6)
    return pytester.path / "report.html"


def column(page, table: str, index: int) -> list[str]:
    """``data-sort`` (or text) of column ``index`` of every body row of ``table``, in page order."""
    return page.eval_on_selector_all(
        f"#{table} tbody > tr:not(.details)",
        f"rows => rows.map(r => r.cells[{index}].getAttribute('data-sort') ?? r.cells[{index}].textContent.trim())",
    )


def test_report_in_headless_chromium(report: Path) -> None:
    sync_playwright = _playwright()
    ARTIFACTS.mkdir(exist_ok=True)
    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="light")
            page = context.new_page()
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
            page.on("request", lambda r: requests.append(r.url))
            url = report.as_uri()
            page.goto(url)
            page.wait_for_load_state("load")
            assert page.title() == "agentrace report"
            assert page.locator("svg.chart").count() == 4
            assert page.locator("#runs tbody.run").count() == 24

            # theme: starts light (the emulated preference), toggles to dark, and stays dark after a reload
            assert page.get_attribute("html", "data-theme") == "light"
            assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"
            page.screenshot(path=str(ARTIFACTS / "report-light.png"), full_page=True)
            page.click("#theme-toggle")
            assert page.get_attribute("html", "data-theme") == "dark"
            assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
            assert page.inner_text("#theme-toggle") == "Light theme"
            page.reload()
            assert page.get_attribute("html", "data-theme") == "dark"
            page.screenshot(path=str(ARTIFACTS / "report-dark.png"), full_page=False)
            page.click("#theme-toggle")
            assert page.get_attribute("html", "data-theme") == "light"

            # sorting: a number column of the tasks table, ascending then descending
            header = page.locator("#tasks thead th", has_text="Tokens/run")
            tokens_col = [h.strip() for h in page.eval_on_selector_all("#tasks thead th", "hs => hs.map(h => h.textContent)")].index("Tokens/run")
            header.click()
            ascending = [float(v) for v in column(page, "tasks", tokens_col)]
            assert ascending == sorted(ascending) and len(set(ascending)) > 1
            assert header.get_attribute("aria-sort") == "ascending"
            header.click()
            assert [float(v) for v in column(page, "tasks", tokens_col)] == sorted(ascending, reverse=True)
            # a text column of the runs table: each run keeps its details row while rows move
            page.locator("#runs thead th", has_text="Agent").click()
            agents = column(page, "runs", 4)
            assert agents == sorted(agents) and agents[0] == "alpha" and agents[-1] == "reader"
            pairs = page.eval_on_selector_all(
                "#runs tbody.run", "bs => bs.map(b => [b.querySelector('button.expand').getAttribute('aria-controls'), b.rows[1].id])")
            assert all(a == b for a, b in pairs)

            # filtering (as pytest-html's outcome toggles): one toggle per outcome with its count, and a filter box
            def shown() -> list[list[str]]:
                return page.eval_on_selector_all(
                    "#runs tbody.run",
                    "bs => bs.filter(b => !b.hidden).map(b => [b.rows[0].cells[4].textContent, "
                    "b.rows[0].cells[6].textContent])")

            toggles = page.eval_on_selector_all("label.outcome", "ls => ls.map(l => l.textContent.trim())")
            assert toggles == ["18 passed", "6 failed"]
            assert len(shown()) == 24 and page.inner_text("#run-filter-count") == "24 of 24 runs shown"
            page.uncheck("input.outcome-toggle[value=passed]")
            # the failures: gamma on fix-add (3 reps) and the trial's baseline arm (reader, 3 reps)
            assert sorted(a for a, _ in shown()) == ["gamma"] * 3 + ["reader"] * 3
            assert {s for _, s in shown()} == {"failed"}
            assert page.inner_text("#run-filter-count") == "6 of 24 runs shown"
            page.fill("#run-filter-text", "GAMMA fix-add")  # every word must match, in any case
            assert shown() == [["gamma", "failed"]] * 3
            page.check("input.outcome-toggle[value=passed]")
            assert sorted(a for a, _ in shown()) == ["gamma"] * 3  # gamma passes fix-mul, not fix-add
            page.fill("#run-filter-text", "alpha")
            assert [a for a, _ in shown()] == ["alpha"] * 6
            assert page.inner_text("#run-filter-count") == "6 of 24 runs shown"
            page.fill("#run-filter-text", "docs")  # the trial's docs arm
            assert len(shown()) == 3
            page.screenshot(path=str(ARTIFACTS / "report-filtered.png"), full_page=False)
            page.fill("#run-filter-text", "")
            assert len(shown()) == 24

            # expanding a run shows its prompt (escaped: the task's <script> is text), answer and tool calls
            first = page.locator("#runs tbody.run").first
            details = first.locator("tr.details")
            assert details.is_hidden()
            first.locator("button.expand").click()
            assert details.is_visible() and first.locator("button.expand").get_attribute("aria-expanded") == "true"
            text = details.inner_text()
            assert "<script>alert(1)</script>" in text and "Tool calls (3)" in text and "Final answer" in text
            assert "<b>&amp; done</b>" in text  # the answer's markup is shown, not rendered
            page.screenshot(path=str(ARTIFACTS / "report-expanded.png"), full_page=False)
            first.locator("button.expand").click()
            assert details.is_hidden()
            context.close()

            # the same page at a desktop width and at a phone's (390 px): nothing wider than the window, every chart
            # card inside it, wide tables scrolling in their own box; an expanded run shows its transcript and links
            # its files, which exist next to the page
            for width in (1280, 390):
                context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme="light")
                page = context.new_page()
                page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                page.on("request", lambda r: requests.append(r.url))
                page.goto(url)
                page.wait_for_load_state("load")
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                cards = page.eval_on_selector_all("figure", "fs => fs.map(f => f.getBoundingClientRect().right)")
                assert len(cards) == 4 and max(cards) <= width
                charts = page.eval_on_selector_all("svg.chart", "ss => ss.map(s => s.getBoundingClientRect().right)")
                assert max(charts) <= width
                page.screenshot(path=str(ARTIFACTS / f"report-{width}.png"), full_page=True)
                first = page.locator("#runs tbody.run").first
                first.locator("button.expand").click()
                details = first.locator("tr.details")
                text = details.inner_text()
                assert "Transcript (2 turns)" in text and "Turn 1: user (prompt)" in text and "Turn 2: agent" in text
                hrefs = details.locator("ul.run-files a").evaluate_all("as => as.map(a => a.href)")
                names = details.locator("ul.run-files a").evaluate_all("as => as.map(a => a.textContent)")
                assert {"run.json", "trajectory.json", "prompt.txt"} <= set(names)
                assert all(h.startswith(report.parent.as_uri() + "/") and Path(unquote(h[len("file://"):])).is_file() for h in hrefs)
                assert page.evaluate("document.documentElement.scrollWidth") <= width  # still, with a run open
                page.screenshot(path=str(ARTIFACTS / f"report-{width}-expanded.png"), full_page=False)
                context.close()
        finally:
            browser.close()
    assert problems == []
    assert set(requests) == {report.as_uri()}  # nothing fetched but the page itself
    for name in ("report-light.png", "report-1280.png", "report-390.png"):
        assert (ARTIFACTS / name).stat().st_size > 10_000
