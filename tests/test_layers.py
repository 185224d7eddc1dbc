"""The package's layers import only downward: no import circle, and imports of the package's own modules at module
top (at most 10% inside functions, each with a reason). Read from the code with ``ast``, not from a list."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_agentrace"
# top (entry points) to bottom; a module may import its own layer and the ones below it
LAYERS = [
    ("plugin", "cli"),
    ("options",),
    ("report",),
    ("spec",),
    ("run", "agents", "model_double"),
    ("stats",),
    ("record",),
    ("errors", "argtypes", "strict", "fstree", "untrusted", "__init__"),
]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "builtin_tasks" in path.parts or "example_trial" in path.parts:
            continue
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts[:-1]) if rel.name == "__init__" else list(rel.parts)
        found[".".join(parts)] = path
    return found


def own_imports() -> tuple[dict[str, set[str]], int, list[tuple[str, str]]]:
    """``({module: modules it imports at runtime}, imports at top, [(module, imported) inside functions])``."""
    mods = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    top, inner = 0, []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("pytest_agentrace"):
                continue
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module for a in node.names]
            up, in_function, typing_only = node, False, False
            while up in parents:
                up = parents[up]
                in_function |= isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef))
                typing_only |= isinstance(up, ast.If) and "TYPE_CHECKING" in ast.unparse(up.test)
            for target in targets:
                if target == name or typing_only:
                    continue
                edges[name].add(target)
                if in_function:
                    inner.append((name, target))
                else:
                    top += 1
    return edges, top, inner


def layer_of(module: str) -> int:
    first = module.split(".")[1] if "." in module else "__init__"
    return next(i for i, names in enumerate(LAYERS) if first in names)


def test_no_import_circle() -> None:
    edges, _, _ = own_imports()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                pytest.fail("import circle: " + " -> ".join([*stack[stack.index(nxt):], nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(modules()):
        if module not in state:
            visit(module)


def test_layers_import_only_downward() -> None:
    edges, _, _ = own_imports()
    upward = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets if layer_of(b) < layer_of(a))
    assert upward == []


def test_own_imports_sit_at_module_top() -> None:
    _, top, inner = own_imports()
    assert len(inner) <= 0.10 * (top + len(inner)), inner


# the run layer's tiers, top to bottom: a module imports its own tier and the ones below it (and the layers below
# run/); every module of run/ has a tier here (a new one must be placed), agents/ and model_double/ sit whole in
# theirs
RUN_TIERS = [
    ("pipeline", ("run.pipeline", "run.race", "run.resume", "run.agent", "run.judge", "run.task", "run.trial",
                  "run.harbor")),
    ("adapters", ("agents", "model_double")),
    ("desk", ("run.workspace", "run.desk", "run.snapshot", "run.treefiles", "run.inputs", "run.linksafe", "run.cleantree", "run.machinery", "run.cleanlayers", "run.counting", "run.checks")),
    ("box", ("run.sandbox", "run.seccomp", "run.limits", "run.cgroup", "run.process", "run.reaper", "run.slots", "run.outbox", "run.discard",
             "run.network", "run.netbridge", "run.netproxy", "run.launch")),
    ("values", ("run.runspec", "run")),
]


def run_tier(module: str) -> int | None:
    """Index in ``RUN_TIERS`` of a module of the run layer (None: another layer)."""
    name = module.removeprefix("pytest_agentrace.")
    for i, (_, names) in enumerate(RUN_TIERS):
        if name in names or any(name.startswith(f"{n}.") for n in names if "." not in n and n != "run"):
            return i
    return None


def test_every_run_module_has_a_tier() -> None:
    run_layer = [m for m in modules() if layer_of(m) == layer_of("pytest_agentrace.run")]
    assert [m for m in run_layer if run_tier(m) is None] == []


def run_upward(edges: dict[str, set[str]]) -> list[str]:
    """``"importer (tier) -> imported (tier)"`` for each import of the run layer that goes up a tier."""
    return sorted(f"{a} ({RUN_TIERS[run_tier(a)][0]}) -> {b} ({RUN_TIERS[run_tier(b)][0]})"
                  for a, targets in edges.items() if run_tier(a) is not None
                  for b in targets if run_tier(b) is not None and run_tier(b) < run_tier(a))


def test_run_tiers_import_only_downward() -> None:
    edges, _, _ = own_imports()
    assert run_upward(edges) == []


def test_run_tier_check_finds_an_upward_import() -> None:
    """The check is not vacuous: the pipeline does import the box, and a box module importing the pipeline (or the
    values importing the desk) is named."""
    edges, _, _ = own_imports()
    assert "pytest_agentrace.run.sandbox" in edges["pytest_agentrace.run.agent"]
    bad = {"pytest_agentrace.run.sandbox": {"pytest_agentrace.run.pipeline", "pytest_agentrace.record.model"},
           "pytest_agentrace.run.runspec": {"pytest_agentrace.run.workspace"},
           "pytest_agentrace.run.checks": {"pytest_agentrace.run.counting"}}
    assert run_upward(bad) == [
        "pytest_agentrace.run.runspec (values) -> pytest_agentrace.run.workspace (desk)",
        "pytest_agentrace.run.sandbox (box) -> pytest_agentrace.run.pipeline (pipeline)",
    ]
    assert run_tier("pytest_agentrace.agents.codex") == run_tier("pytest_agentrace.model_double.netns")
    assert run_tier("pytest_agentrace.stats.answers") is None
