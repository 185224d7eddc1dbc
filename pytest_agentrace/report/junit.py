"""JUnit XML: the ``agentrace.*`` properties of each run (``run_properties``) and of the session
(``suite_properties``), the whole document of a session result (``render``, ``agentrace render OUT --format junit``),
and the finishing of the file pytest's junitxml plugin wrote in a session (``patch_junit``).

The document has the shape ``_pytest.junitxml`` writes (``junit_family=xunit2``, the default; pytest's module names
Jenkins' xunit-plugin ``junit-10.xsd`` as its schema, which allows ``<properties>`` only per ``<testsuite>``: the
per-case properties, as pytest's ``record_property`` writes them, are read by CI tools but outside that XSD): ``<testsuites name="pytest tests">`` holding one
``<testsuite name="pytest">`` with ``tests``, ``errors``, ``failures``, ``skipped``, ``time`` (seconds, 3 decimals),
``timestamp`` (ISO 8601) and ``hostname``, its ``<properties>``, and one ``<testcase classname name time>`` per run:

- ``classname``: the run's task or trial file as its pytest node id names it (``spec.builtin.node_path``; relative
  to the session's rootdir: its session row's, else the one its results folder's ``last-session.json`` names, else
  the working directory), ``/`` made ``.``
  as pytest does; ``name``: the item's name, ``case[agent-rN]`` (tasks) or ``case[arm-agent-rN]`` (trials);
  ``time``: the run's ``total_seconds`` (pytest's covers the item's setup, call and teardown: the same run);
- ``<properties>``: ``run_properties`` (the run's record as one JSON payload, then scalars);
- what pytest writes for the item's outcome: status ``error`` -> ``<error>`` (an infrastructure fault), ``failed``
  or ``timeout`` -> ``<failure>``, ``stopped`` (race mode) -> ``<skipped type="pytest.skip">``; a baseline expected
  to fail (``view.expects_failure``: ``noop``, ``expect: fail``) that did fail -> ``<skipped type="pytest.xfail">``,
  one that passed -> ``<failure>`` (pytest's strict xfail: ``[XPASS(strict)]``). The totals count these elements.

In a session the file is pytest's (``--junitxml``): its junitxml plugin writes each item's ``user_properties``,
which are ``run_properties`` of the outcome as the run ended. A task run's composite score depends on the other agents
of its task and rep, so it is known only when the session has every run; ``patch_junit`` then writes each run's
properties again from the session result (the same function, the final score included), turns the ``<failure>`` of
an ``error`` run into ``<error>`` (as a fault in setup would be; the totals counted again) and sets the suite's
properties. So the file a session finished and the render of its results folder carry the same properties; what
only the session's file has: the test cases of runs skipped before they ran (an agent CLI not installed,
stop-when-decided: no record), other tests of the session, and a reused run's ``reused`` flag in its record.

Every string is redacted (``report.view.shown``, as the other formats) and then made XML 1.0: each character XML 1.0
forbids (C0 controls but tab, newline and carriage return; DEL, as pytest; lone surrogates; U+FFFE, U+FFFF) is
written as ``#xNN``, pytest's visible escape (``_pytest.junitxml.bin_xml_escape``); ElementTree escapes ``&``,
``<``, ``>``, quotes and newlines in attributes. What an agent wrote never makes the file invalid XML.
"""

from __future__ import annotations

import json
import os
import platform
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.report.result import SessionResult
from pytest_agentrace.report.view import expects_failure, generated, session_field, shown
from pytest_agentrace.spec.builtin import node_path

OUTCOME_PROPERTY = "agentrace.outcome"  # the run's record (JSON): also the payload an item sends to the controller
RUN_ID_PROPERTY = "agentrace.run_id"
STATUS_PROPERTY = "agentrace.status"
DIGEST_PROPERTY = "agentrace.results_digest"
PREFIX = "agentrace."
SUITE_NAME, SUITES_NAME = "pytest", "pytest tests"  # pytest's junit_suite_name default and its <testsuites> name

# XML 1.0's Char production (https://www.w3.org/TR/xml/#charsets) less DEL, as pytest's bin_xml_escape
_NOT_XML = re.compile("[^\t\n\r\x20-\x7e\x80-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def xml_text(value: object) -> str:
    """``str(value)`` with each character XML 1.0 forbids (and DEL) written ``#xNN`` (``#x1B`` for ESC, ``#xD800``
    for a lone surrogate), as pytest's ``bin_xml_escape``; everything else unchanged (ElementTree escapes markup)."""
    return _NOT_XML.sub(lambda m: f"#x{ord(m.group()):02X}", str(value))


def run_properties(outcome: Outcome) -> list[tuple[str, Any]]:
    """The ``agentrace.*`` properties of one run, in order: ``agentrace.outcome`` (the record, ``Outcome.record``,
    as JSON with sorted keys), ``run_id``, ``status``, ``score`` (only when the outcome has one: a trial run has no
    composite score, and a task run's is known at the session's end; JUnit carries no empty numeric property),
    ``seconds`` (the agent's), ``lines`` (changed), ``tokens`` and ``cost_usd`` (when known). Values are typed
    (str, float, int); JUnit writes ``str(value)``.

    The run item's ``user_properties`` (``plugin.collect``: the payload the controller reads, and what pytest's
    junitxml writes), ``patch_junit`` and ``render`` all take this list."""
    props: list[tuple[str, Any]] = [
        (OUTCOME_PROPERTY, json.dumps(outcome.record, sort_keys=True)),
        (RUN_ID_PROPERTY, outcome.run_id),
        (STATUS_PROPERTY, outcome.status),
        ("agentrace.seconds", outcome.seconds),
        ("agentrace.lines", outcome.lines_changed),
    ]
    if outcome.score is not None:
        props.insert(3, ("agentrace.score", outcome.score))
    u = outcome.usage
    if u.total_tokens is not None:
        props.append(("agentrace.tokens", u.total_tokens))
    if u.cost_usd is not None:
        props.append(("agentrace.cost_usd", u.cost_usd))
    return props


def suite_properties(result: SessionResult) -> list[tuple[str, str]]:
    """The ``<testsuite>``'s ``agentrace.*`` properties: ``agentrace.results_digest`` (``result.context.digest``,
    ``record.manifest.results_digest`` of the results folder; none when unknown)."""
    digest = result.context.digest
    return [(DIGEST_PROPERTY, digest)] if digest else []


def _properties(pairs: Iterable[tuple[str, Any]]) -> list[ET.Element]:
    return [ET.Element("property", name=xml_text(name), value=xml_text(value)) for name, value in pairs]


def case_name(outcome: Outcome) -> str:
    """The run item's pytest name (``run.runspec.RunSpec.item_name``): ``case[agent-rN]``, ``case[arm-agent-rN]``."""
    ids = [outcome.agent, f"r{outcome.rep}"] if outcome.kind == "task" else [outcome.arm, outcome.agent, f"r{outcome.rep}"]
    return f"{outcome.case}[{'-'.join(ids)}]"


def classname(outcome: Outcome, rootdir: Path, invocation: Path) -> str:
    """The JUnit classname pytest gives the run's item: its file's node-id path (``spec.builtin.node_path``) with
    ``/`` made ``.`` (``_pytest.junitxml.mangle_test_address``)."""
    try:
        path = node_path(Path(outcome.source), rootdir, invocation)
    except (OSError, ValueError):  # no built-in tasks folder, a source that is no path
        path = str(outcome.source)
    return re.sub(r"\.py$", "", path.replace("/", "."))


def _report_lines(run: Outcome) -> list[str]:
    """The failing checks (``--- tests: `cmd` exit 1``, as the session's failure report) and what an answer missed."""
    lines = [f"--- {c.name}: `{c.command}` {c.why}" for c in run.checks.values() if not c.passed]
    if run.answer_score and run.answer_score.get("missing"):
        lines.append("missing from the answer: " + ", ".join(map(str, run.answer_score["missing"])))
    return lines


def _outcome_element(run: Outcome) -> ET.Element | None:
    """The ``<error>`` / ``<failure>`` / ``<skipped>`` pytest writes for the run's item (module docstring), or None."""
    head = f"{run.run_id}: {run.status}: {run.reason or ''}".rstrip(": ")
    baseline = expects_failure(run)
    if run.status == Status.ERROR:
        message = f"{run.run_id}: infrastructure error: {run.reason or ''}"
        tag, attrs, text = "error", {"message": message}, "\n".join([message, *_report_lines(run)])
    elif baseline and run.status in (Status.FAILED, Status.TIMEOUT):
        tag, attrs, text = "skipped", {"type": "pytest.xfail", "message": f"{run.agent} is a baseline expected to fail"}, None
    elif baseline and run.status == Status.PASSED:
        message = f"[XPASS(strict)] {run.agent} is a baseline expected to fail"
        tag, attrs, text = "failure", {"message": message}, message
    elif run.status in (Status.FAILED, Status.TIMEOUT):
        tag, attrs, text = "failure", {"message": head}, "\n".join([head, *_report_lines(run)])
    elif run.status == Status.STOPPED:
        tag, attrs, text = "skipped", {"type": "pytest.skip", "message": head}, head
    else:
        return None
    element = ET.Element(tag, {k: xml_text(v) for k, v in attrs.items()})
    if text is not None:
        element.text = xml_text(text)
    return element


def _count(suite: ET.Element, every: bool = True) -> None:
    """Set a ``<testsuite>``'s ``errors`` and ``failures`` (and with ``every`` its ``skipped`` and ``tests``) from
    its test cases, one per ``<error>`` / ``<failure>`` / ``<skipped>`` element and case, as junitxml counts them
    (``tests`` and ``skipped`` do not change when ``patch_junit`` makes a failure an error)."""
    cases = list(suite.iter("testcase"))
    suite.set("errors", str(sum(len(c.findall("error")) for c in cases)))
    suite.set("failures", str(sum(len(c.findall("failure")) for c in cases)))
    if every:
        suite.set("skipped", str(sum(len(c.findall("skipped")) for c in cases)))
        suite.set("tests", str(len(cases)))


def render(result: SessionResult) -> str:
    """The JUnit XML document of ``result`` (module docstring): UTF-8 text with its XML declaration. The suite's
    ``time`` is the sum of its cases' (runs of several processes overlap), ``timestamp`` the earliest run's start
    (else when the result was rendered, ``view.generated``), ``hostname`` the session row's host, else this
    machine's. A result without runs gives a suite of 0 tests."""
    view = shown(result)
    runs = view.outcomes
    invocation = Path.cwd()
    rootdir = Path(session_field(view, "rootdir") or view.context.rootdir or invocation)
    suite = ET.Element("testsuite", name=SUITE_NAME)
    if pairs := suite_properties(view):
        ET.SubElement(suite, "properties").extend(_properties(pairs))
    total, classnames = 0.0, {}  # one per task or trial file (each a few path look-ups)
    for run in runs:
        seconds = run.total_seconds or run.seconds or 0.0
        total += seconds
        if run.source not in classnames:
            classnames[run.source] = xml_text(classname(run, rootdir, invocation))
        case = ET.SubElement(suite, "testcase", classname=classnames[run.source], name=xml_text(case_name(run)),
                             time=f"{seconds:.3f}")
        ET.SubElement(case, "properties").extend(_properties(run_properties(run)))
        if (element := _outcome_element(run)) is not None:
            case.append(element)
    _count(suite)
    suite.set("time", f"{total:.3f}")
    suite.set("timestamp", xml_text(min((r.started for r in runs if r.started), default=None) or generated(result)))
    suite.set("hostname", xml_text(session_field(view, "host") or platform.node()))
    suites = ET.Element("testsuites", name=SUITES_NAME)
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _set_suite_properties(suite: ET.Element, pairs: list[tuple[str, str]]) -> int:
    props = suite.find("properties")
    if props is None and pairs:
        props = ET.Element("properties")
        suite.insert(0, props)
    changed = 0
    for name, value in pairs:
        prop = next((q for q in props.iter("property") if q.get("name") == name), None)  # type: ignore[union-attr]
        if prop is None:
            prop = ET.SubElement(props, "property", name=name)  # type: ignore[arg-type]
        if prop.get("value") != xml_text(value):
            prop.set("value", xml_text(value))
            changed += 1
    return changed


def _set_run_properties(props: ET.Element, run: Outcome) -> int:
    """Replace the ``agentrace.*`` properties of a test case's ``<properties>`` with ``run_properties(run)`` (at the
    place of the first; other properties kept); 1 when they changed, else 0."""
    old = [p for p in props if p.tag == "property" and str(p.get("name", "")).startswith(PREFIX)]
    new = _properties(run_properties(run))
    if [(p.get("name"), p.get("value")) for p in old] == [(p.get("name"), p.get("value")) for p in new]:
        return 0
    at = list(props).index(old[0]) if old else len(props)
    for p in old:
        props.remove(p)
    for i, p in enumerate(new):
        props.insert(at + i, p)
    return 1


def patch_junit(xml_path: Path, result: SessionResult) -> int:
    """Finish the JUnit XML file pytest's junitxml plugin wrote (module docstring): each test case whose
    ``agentrace.run_id`` is a run of ``result`` gets that run's ``run_properties`` (from ``view.shown(result)``,
    the final score included), its ``<failure>`` becomes ``<error>`` when the run's status is ``error``, every
    ``<testsuite>`` gets ``suite_properties(result)`` and its totals counted again from its cases.

    Returns the number of elements changed; a missing or unreadable file changes nothing (and is not written)."""
    try:
        tree = ET.parse(xml_path)
    except (OSError, ET.ParseError):
        return 0
    view = shown(result)
    runs: dict[str, Outcome] = {}
    for run in view.outcomes:  # the run id as pytest wrote it (its escape also writes characters beyond U+FFFF #x..)
        runs[xml_text(run.run_id)] = runs[_ASTRAL.sub(lambda m: f"#x{ord(m.group()):04X}", xml_text(run.run_id))] = run
    root = tree.getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    changed = sum(_set_suite_properties(suite, suite_properties(view)) for suite in suites)
    for case in root.iter("testcase"):
        props = case.find("properties")
        if props is None:
            continue
        run_id = next((p.get("value") for p in props.iter("property") if p.get("name") == RUN_ID_PROPERTY), None)
        run = runs.get(run_id or "")
        if run is None:
            continue
        if run.status == Status.ERROR:
            for failure in case.findall("failure"):
                failure.tag = "error"
                changed += 1
        changed += _set_run_properties(props, run)
    if changed:
        for suite in suites:
            _count(suite, every=False)
        tmp = Path(f"{xml_path}.agentrace-tmp")
        tree.write(tmp, encoding="utf-8", xml_declaration=True)
        os.replace(tmp, xml_path)
    return changed
