"""Finish the JUnit XML file pytest's junitxml plugin wrote: the session's final scores and the runs' error kinds.

A run's composite score depends on the other agents of the same task and rep (time and lines are normalised across
them), so it is known only when the session has every run: a run's item records no score. After pytest's junitxml
plugin has written the file, the controller writes each run's ``agentrace.score`` once (after its
``agentrace.status``; none when a run has no score: JUnit carries no empty numeric property), matching test cases by
their ``agentrace.run_id`` property. A run's agent runs in
its item's call phase, where junitxml writes a failure as ``<failure>``: the ``<failure>`` of a run whose status is
``error`` (an infrastructure fault) becomes ``<error>``, as a fault in setup would be, and the ``<testsuite>``'s
``errors`` / ``failures`` totals are counted again from its cases, as junitxml counts them (one per ``<error>`` /
``<failure>`` element). JUnit XML schema as written by ``_pytest.junitxml``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path


def patch_junit(xml_path: Path, scores: Mapping[str, float | None], errors: Collection[str] = (),
                suite: Mapping[str, str] | None = None) -> int:
    """Set ``agentrace.score`` for every test case whose ``agentrace.run_id`` is in ``scores`` (added after its
    ``agentrace.status``, or replaced; removed when the score is None), turn the ``<failure>`` of each run id in ``errors`` into ``<error>``, and set each of ``suite``
    (e.g. ``agentrace.results_digest``) as a ``<property>`` of every ``<testsuite>``.

    Returns the number of elements changed; a missing or unreadable file changes nothing.
    """
    import xml.etree.ElementTree as ET

    try:
        tree = ET.parse(xml_path)
    except (OSError, ET.ParseError):
        return 0
    changed = 0
    root = tree.getroot()
    for testsuite in [root] if root.tag == "testsuite" else root.iter("testsuite"):
        for name, value in (suite or {}).items():
            props = testsuite.find("properties")
            if props is None:
                props = ET.Element("properties")
                testsuite.insert(0, props)
            prop = next((q for q in props.iter("property") if q.get("name") == name), None)
            if prop is None:
                prop = ET.SubElement(props, "property", {"name": name})
            prop.set("value", value)
            changed += 1
    for case in tree.getroot().iter("testcase"):
        props = case.find("properties")
        if props is None:
            continue
        run_id = next((p.get("value") for p in props.iter("property") if p.get("name") == "agentrace.run_id"), None)
        if run_id in errors:
            for failure in case.findall("failure"):
                failure.tag = "error"
                changed += 1
        if run_id not in scores:
            continue
        value = scores[run_id]
        found = [p for p in props.iter("property") if p.get("name") == "agentrace.score"]
        for p in found:  # a score recorded before the session's end (a reused run's): the final one replaces it
            if value is None:
                props.remove(p)
                changed += 1
            elif p.get("value") != str(value):
                p.set("value", str(value))
                changed += 1
        if value is not None and not found:
            names = [p.get("name") for p in props]
            at = names.index("agentrace.status") + 1 if "agentrace.status" in names else len(names)
            score = ET.Element("property", {"name": "agentrace.score", "value": str(value)})
            score.tail = props[at - 1].tail if at else None
            props.insert(at, score)
            changed += 1
    if changed:
        for suite in tree.getroot().iter("testsuite"):
            _recount(suite)
        tree.write(xml_path, encoding="utf-8", xml_declaration=True)
    return changed


def _recount(suite: object) -> None:
    """Set a ``<testsuite>``'s ``errors`` and ``failures`` attributes to the ``<error>`` / ``<failure>`` elements of
    its test cases (``tests`` and ``skipped`` do not change when a failure becomes an error)."""
    cases = list(suite.iter("testcase"))  # type: ignore[attr-defined]
    suite.set("errors", str(sum(len(c.findall("error")) for c in cases)))  # type: ignore[attr-defined]
    suite.set("failures", str(sum(len(c.findall("failure")) for c in cases)))  # type: ignore[attr-defined]
