"""Which agents a task or trial file runs, and which of the collected runs a session keeps: pure rules over
``AgentSpec``s and ``RunSpec``s, given the settings they read as plain values (no pytest, no options).

Agents (``choose_agents``, one rule for tasks, Harbor tasks and trials): without ``--agentrace-agent`` a file runs
its own agents. Each ``--agentrace-agent`` spec picks the file's entries it names (by id, name or ``name:model``,
so their ``command``, ``env`` and model double are kept); a spec that names none runs as given (any built-in agent
can run any file); a spec that is a whole agent (``overrides``: a mapping with a ``command``, ``env``, ...)
replaces the entries of its name. The file's entries keep their ids; the others get unique ids (``~2``).
``--agentrace-validate`` runs ``oracle`` and ``noop`` only (``VALIDATION_AGENTS``).

Runs (``select_runs``), in this order, the same on the controller and on every pytest-xdist worker:

1. ``--agentrace-difficulty``: task runs of other levels are deselected (by name, ``spec.builtin.same_level``);
   trial runs have no difficulty and stay. A wanted level no collected task has is a warning;
2. ``--agentrace-validate``: trial runs are deselected (validation proves tasks);
3. ``--agentrace-shard K/N``: the other shards' runs are deselected (``spec.shard.select``; under
   ``--agentrace-race`` a race's runs stay together, ``run.race.group_id``); pytest's own tests run on shard 1;
4. collisions: runs of different files that would write one results folder (``runs/<case>/<arm>/<agent>/<rep>``)
   are kept with an error each (their items fail in setup) instead of overwriting each other's records;
5. ``--agentrace-stop-when-decided``: runs are ordered rep-major (stable), so every cell's early reps come first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_agentrace.agents import ADAPTERS
from pytest_agentrace.errors import SpecError, did_you_mean
from pytest_agentrace.run.race import group_id
from pytest_agentrace.spec.builtin import SAME_NAME_NOTE, keep_difficulty, level_key, same_level, sorted_levels
from pytest_agentrace.spec.common import AgentSpec, parse_agent, unique_agent_ids
from pytest_agentrace.spec.matrix import RunSpec
from pytest_agentrace.spec.shard import Shard, split

AGENT_OPTION = "--agentrace-agent"
VALIDATION_AGENTS = ("oracle", "noop")  # --agentrace-validate: the reference solution and no change


# -- agents -----------------------------------------------------------------------------------------------------


def wanted_agents(specs: Sequence[str]) -> tuple[AgentSpec, ...] | None:
    """The ``--agentrace-agent`` values parsed (None when none was given). Names are checked against each file's
    agents by ``choose_agents``, so a name a file lists need not be a built-in one. Raises ``SpecError`` for a
    malformed value (an empty name, a flow mapping that is not YAML)."""
    if not specs:
        return None
    return tuple(parse_agent(Path(AGENT_OPTION), f"{AGENT_OPTION} {s}", s, check_known=False, trusted=True) for s in specs)


def overrides(spec: AgentSpec) -> bool:
    """Whether an ``--agentrace-agent`` spec says more than a name (``claude``, ``codex:gpt-5``, or the same as a
    mapping): a mapping with a ``command``, ``env``, ``args``, ... is a whole agent, and replaces the file's entries
    of its name instead of picking them."""
    return spec != type(spec)(name=spec.name, id=spec.id, model=spec.model)


def choose_agents(listed: Sequence[AgentSpec], wanted: Sequence[AgentSpec] | None, path: Path) -> tuple[AgentSpec, ...]:
    """The agents of a file's runs (the module docstring's rule): ``listed`` (the file's own, or a Harbor task's
    defaults) filtered and extended by ``wanted`` (``wanted_agents``; None: the file's list).

    Raises ``SpecError`` when no agent is left (``path``, key ``agents``), or for a wanted plain name that is
    neither one of the file's agents nor a built-in agent (key ``--agentrace-agent NAME``, with a suggestion)."""
    chosen: list[AgentSpec] = list(listed)
    if wanted:
        chosen = []
        for w in wanted:
            named = _named(w, listed)
            if not named and w.command is None:
                _check_known(w, listed)
            if overrides(w):
                named = [w]
            chosen += [a for a in named or [w] if a not in chosen]
        chosen = _keep_file_ids(chosen, listed)
    if not chosen:
        raise SpecError(path, "agents", f"no agents to run; add e.g. agents: [claude, noop] or pass {AGENT_OPTION}")
    return tuple(chosen)


def override_effects(listed: Sequence[AgentSpec], wanted: Sequence[AgentSpec] | None) -> dict[str, str]:
    """What each whole-agent spec of ``wanted`` (``overrides``) does to a file whose agents are ``listed``, by the
    spec's id: ``"replaced"`` when the file has entries of its name (``choose_agents`` runs it in their place), else
    ``"added"`` (it runs beside the file's agents). ``{}`` without ``--agentrace-agent``."""
    return {w.id: "replaced" if _named(w, listed) else "added" for w in wanted or () if overrides(w)}


def _named(wanted: AgentSpec, listed: Sequence[AgentSpec]) -> list[AgentSpec]:
    """The entries of ``listed`` a wanted spec names (by id, name or ``name:model``)."""
    return [a for a in listed if wanted.id in (a.id, a.name, a.label)]


def validation_agents() -> tuple[AgentSpec, ...]:
    """The two agents of ``--agentrace-validate`` (``oracle``, ``noop``); a file's agents and ``--agentrace-agent``
    do not apply."""
    return unique_agent_ids(parse_agent(Path("--agentrace-validate"), "agents", a) for a in VALIDATION_AGENTS)


def _check_known(wanted: AgentSpec, listed: Sequence[AgentSpec]) -> None:
    names = sorted(set(ADAPTERS) - {"plain"})
    if wanted.name in names:
        return
    ids = [a.id for a in listed]
    raise SpecError(Path(AGENT_OPTION), f"{AGENT_OPTION} {wanted.id}",
                    f"unknown agent {wanted.name!r}{did_you_mean(wanted.name, [*ids, *names])}; this file's agents: "
                    f"{', '.join(ids) or 'none'}; built-in agents: {', '.join(names)}; for an agent of your own give a "
                    "command, e.g. {name: mine, command: 'my-agent {prompt}'}")


def _keep_file_ids(chosen: Iterable[AgentSpec], listed: Sequence[AgentSpec]) -> list[AgentSpec]:
    """``chosen`` with the file's entries as they are and the others' ids made safe and unique (``~2``), also
    against the file's ids (``spec.common.unique_agent_ids``)."""
    chosen = list(chosen)
    taken = {a.id for a in chosen if a in listed}
    out = []
    for agent in chosen:
        if agent not in listed:
            agent = unique_agent_ids([agent])[0]
            base, n = agent.id, 1
            while agent.id in taken:
                n += 1
                agent = replace(agent, id=f"{base}~{n}")
            taken.add(agent.id)
        out.append(agent)
    return out


# -- runs -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    """The settings ``select_runs`` reads: ``difficulty`` (``--agentrace-difficulty`` levels; empty: all),
    ``validate``, ``shard`` (None: all runs), ``history`` (expected seconds per cell, ``record.store.cell_seconds``;
    read only under a shard), ``race`` (a race's runs go to one shard), ``rep_major``
    (``--agentrace-stop-when-decided``)."""

    difficulty: tuple[str, ...] = ()
    validate: bool = False
    shard: Shard | None = None
    history: Mapping[str, float] = field(default_factory=dict)
    race: bool = False
    rep_major: bool = False


@dataclass(frozen=True)
class Selection:
    """What ``select_runs`` decided. ``kept``: the runs to run, in the order they run; ``deselected``: ``(run,
    reason)`` for each run left out; ``errors``: ``(run, message)`` for kept runs that must fail instead of running
    (collisions); ``warnings``: one line each; ``plain``: whether pytest's own tests (not runs) are kept (only shard
    1 of N keeps them, so they run once over all shards); ``split``: the digest of a shard's split of the runs over
    every shard (``spec.shard.split_digest``; None without a shard of N > 1)."""

    kept: tuple[RunSpec, ...]
    deselected: tuple[tuple[RunSpec, str], ...] = ()
    errors: tuple[tuple[RunSpec, str], ...] = ()
    warnings: tuple[str, ...] = ()
    plain: bool = True
    split: str | None = None


def select_runs(runs: Sequence[RunSpec], rules: Rules) -> Selection:
    """Apply the module docstring's rules 1-5 to ``runs`` (collected order). Runs are told apart by identity, so
    two equal RunSpecs (one file collected twice) are two runs."""
    kept: list[RunSpec] = []
    dropped: list[tuple[RunSpec, str]] = []
    for spec in runs:
        reason = _filtered(spec, rules)
        if reason:
            dropped.append((spec, reason))
        else:
            kept.append(spec)
    plain, digest = True, None
    if rules.shard is not None and rules.shard.total > 1:
        kept, off, digest = _shard(kept, rules)
        dropped += off
        plain = rules.shard.index == 1
    if rules.rep_major:
        kept.sort(key=lambda spec: spec.rep)
    return Selection(tuple(kept), tuple(dropped), collisions(kept), _difficulty_warnings(runs, rules) + _validate_warnings(runs, rules),
                     plain, digest)


def _filtered(spec: RunSpec, rules: Rules) -> str | None:
    """Why ``spec`` is left out by ``--agentrace-difficulty`` or ``--agentrace-validate`` (None: kept)."""
    if spec.kind == "task" and not keep_difficulty(spec.spec.difficulty, rules.difficulty):
        level = spec.spec.difficulty
        return (f"difficulty {level}" if level is not None else "no difficulty") + f", not {', '.join(rules.difficulty)}"
    if rules.validate and spec.kind != "task":
        return "a trial run: --agentrace-validate runs tasks only"
    return None


def _shard(runs: list[RunSpec], rules: Rules) -> tuple[list[RunSpec], list[tuple[RunSpec, str]], str | None]:
    """The runs of ``rules.shard``, the others (each with its reason) and the split's digest. The unit a shard takes
    whole is the run (its id), or under race mode the race."""
    unit = group_id if rules.race else (lambda spec: spec.id)
    mine, digest = split([unit(spec) for spec in runs], rules.shard, rules.history)
    kept = [spec for spec in runs if unit(spec) in mine]
    taken = {id(spec) for spec in kept}
    return kept, [(spec, f"another shard's run (shard {rules.shard})") for spec in runs if id(spec) not in taken], digest


def collisions(runs: Sequence[RunSpec]) -> tuple[tuple[RunSpec, str], ...]:
    """``(run, message)`` for each run sharing its results folder (case, arm, agent id, rep) with a run of another
    file: two task files with one ``name``, two trials sharing a question id."""
    by_dir: dict[tuple, list[RunSpec]] = {}
    for spec in runs:
        by_dir.setdefault((spec.case, spec.arm, spec.agent.id, spec.rep), []).append(spec)
    errors = []
    for (case, *_rest), group in by_dir.items():
        sources = sorted({str(spec.source) for spec in group})
        if len(sources) > 1:
            message = (f"{' and '.join(sources)} both have a task/question named {case!r}: their runs would share one "
                       f"results folder (runs/{case}/...) and overwrite each other; rename one (task 'name' / question 'id')")
            errors += [(spec, message) for spec in group]
    return tuple(errors)


def _difficulty_warnings(runs: Sequence[RunSpec], rules: Rules) -> tuple[str, ...]:
    """A warning naming the ``--agentrace-difficulty`` levels no collected task has (with the levels they have);
    none when nothing was collected."""
    if not runs or not rules.difficulty:
        return ()
    levels = {spec.spec.difficulty for spec in runs if spec.kind == "task" and spec.spec.difficulty is not None}
    unmatched = [w for w in rules.difficulty if not any(same_level(level, [w]) for level in levels)]
    if not unmatched:
        return ()
    known = sorted_levels(levels)
    hint = did_you_mean(level_key(unmatched[0]), [level_key(level) for level in known])
    return (f"--agentrace-difficulty: no collected task has difficulty {', '.join(unmatched)}{hint}; the tasks' "
            f"levels are {', '.join(known) or 'none'} ({SAME_NAME_NOTE})",)


def _validate_warnings(runs: Sequence[RunSpec], rules: Rules) -> tuple[str, ...]:
    """Under ``--agentrace-validate``, a warning saying how many trial runs were left out and why (a trial has no
    reference solution to prove); none without trial runs."""
    trials = sum(spec.kind != "task" for spec in runs)
    if not rules.validate or not trials:
        return ()
    return (f"--agentrace-validate proves task files (each task's reference solution passes, no change fails); the "
            f"{trials} trial run(s) collected were left out: a trial has no reference solution to validate",)
