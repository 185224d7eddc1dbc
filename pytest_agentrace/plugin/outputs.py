"""Session-end outputs on the pytest controller: the history store, ``--agentrace-html/-md/-json`` and
``$GITHUB_STEP_SUMMARY``. Registered by ``plugin.pytest_configure`` on the controller only (an xdist worker
never writes any of these; it has only its own share of the runs).

Everything happens in ``pytest_sessionfinish`` (after the test loop, when the aggregator holds every run), and
the lines saying what was written are printed in the ``agentrace`` summary. A failure to write a report or the
store is printed as a warning line and never changes the exit status or loses the other outputs.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_agentrace.report.options import STEP_SUMMARY_ENV


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class ReportPlugin:
    """Writes the store row and the report files once per session (controller only)."""

    def __init__(self, config: pytest.Config, aggregator_key: Any, session_id_key: Any):
        self.config = config
        self.aggregator_key = aggregator_key
        self.session_id_key = session_id_key
        self.started = _now()
        self.messages: list[tuple[str, bool]] = []  # (line, is_warning)

    def _path(self, option: str) -> Path | None:
        value = self.config.getoption(option, default=None)
        if not value:
            return None
        path = Path(value).expanduser()
        return path if path.is_absolute() else Path(self.config.invocation_params.dir) / path

    def session_info(self):
        from pytest_agentrace.options import out_dir
        from pytest_agentrace.record.store import SessionInfo

        info = SessionInfo.collect(self.config.stash[self.session_id_key], self.config.rootpath,
                                   args=[str(a) for a in self.config.invocation_params.args], out=out_dir(self.config), started=self.started)
        info.finished = _now()
        return info

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        outcomes = self.config.stash[self.aggregator_key].scored()
        if not outcomes:
            return
        info = self.session_info()
        self._save(info, outcomes)
        targets = {"html": self._path("agentrace_html"), "md": self._path("agentrace_md"), "json": self._path("agentrace_json")}
        summary = os.environ.get(STEP_SUMMARY_ENV)
        if not any(targets.values()) and not summary:
            return
        try:
            doc = self._document(info, outcomes)
        except Exception as exc:  # noqa: BLE001 - a report bug must not break the session
            self.messages.append((f"agentrace: could not build the report: {type(exc).__name__}: {exc}", True))
            return
        self._write(targets, summary, doc)

    def _save(self, info: Any, outcomes: list) -> None:
        from pytest_agentrace.record.store import StoreError, config_path, save

        path = config_path(self.config)
        fresh = [o for o in outcomes if not o.reused]  # a resumed run is in the history of the session that ran it
        if path is None or not fresh:
            return
        try:
            n = save(path, info, fresh)
        except (StoreError, OSError) as exc:
            self.messages.append((f"agentrace: history not saved: {exc}", True))
            return
        reused = len(outcomes) - len(fresh)
        note = f" ({reused} reused runs are saved with the session that ran them)" if reused else ""
        self.messages.append((f"agentrace: saved {n} runs of session {info.id} to {path}{note}", False))

    def _document(self, info: Any, outcomes: list) -> dict[str, Any]:
        from dataclasses import asdict

        from pytest_agentrace.options import out_dir
        from pytest_agentrace.plugin.stats import session_report
        from pytest_agentrace.report.json_export import build_export

        opts = {"reps": self.config.getoption("agentrace_reps", default=None), "timeout": self.config.getoption("agentrace_timeout", default=None)}
        seed = self.config.getoption("agentrace_seed", default=None)
        baseline = self.config.getoption("agentrace_baseline", default=None)
        return build_export(outcomes, out=out_dir(self.config), session=asdict(info), options=opts,
                            baseline=baseline, seed=int(seed) if seed is not None else 0, history=self._history(outcomes),
                            resamples=self.config.getoption("agentrace_resamples", default=None),
                            stats_report=session_report(self.config))

    def _history(self, outcomes: list) -> list | None:
        """Earlier sessions' outcomes from the store (for Elo over time), this session's included."""
        from pytest_agentrace.record.store import Store, StoreError, config_path

        path = config_path(self.config)
        if path is None or not path.exists():
            return None
        try:
            with Store(path) as store:
                rows = store.outcomes(kind="task")
        except StoreError:
            return None
        return rows or None

    def _write(self, targets: dict[str, Path | None], summary: str | None, doc: dict[str, Any]) -> None:
        import json

        from pytest_agentrace.report import html, markdown

        renders = {
            "html": lambda: html.render_report(doc),
            "md": lambda: markdown.render(doc),
            "json": lambda: json.dumps(doc, indent=2, sort_keys=True) + "\n",
        }
        for kind, path in targets.items():
            if path is None:
                continue
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(renders[kind](), encoding="utf-8")
            except Exception as exc:  # noqa: BLE001 - one broken output must not stop the others
                self.messages.append((f"agentrace: could not write {path}: {type(exc).__name__}: {exc}", True))
                continue
            self.messages.append((f"agentrace: wrote {kind} report {path}", False))
        if summary:
            try:
                with open(summary, "a", encoding="utf-8") as fh:
                    fh.write(markdown.render(doc) + "\n")
                self.messages.append((f"agentrace: appended the Markdown summary to ${STEP_SUMMARY_ENV}", False))
            except OSError as exc:
                self.messages.append((f"agentrace: could not append to ${STEP_SUMMARY_ENV} ({summary}): {exc}", True))

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        for line, warning in self.messages:
            terminalreporter.write_line(line, yellow=warning)
