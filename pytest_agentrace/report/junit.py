"""Rewrite ``agentrace.score`` properties in a JUnit XML file with the session's final scores.

A run's composite score depends on the other agents of the same task and rep (time and lines are
normalised across them), so a worker can only record the run's solo score. After pytest's junitxml plugin
has written the file, the controller replaces each ``agentrace.score`` with the final one, matching test
cases by their ``agentrace.run_id`` property (JUnit XML schema as written by ``_pytest.junitxml``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def patch_scores(xml_path: Path, scores: Mapping[str, float | None]) -> int:
    """Set ``agentrace.score`` for every test case whose ``agentrace.run_id`` is in ``scores``.

    Returns the number of properties changed; a missing or unreadable file changes nothing.
    """
    import xml.etree.ElementTree as ET

    try:
        tree = ET.parse(xml_path)
    except (OSError, ET.ParseError):
        return 0
    changed = 0
    for props in tree.getroot().iter("properties"):
        run_id = next((p.get("value") for p in props.iter("property") if p.get("name") == "agentrace.run_id"), None)
        if run_id not in scores:
            continue
        for p in props.iter("property"):
            if p.get("name") == "agentrace.score":
                value = scores[run_id]
                new = "" if value is None else str(value)
                if p.get("value") != new:
                    p.set("value", new)
                    changed += 1
    if changed:
        tree.write(xml_path, encoding="utf-8", xml_declaration=True)
    return changed
