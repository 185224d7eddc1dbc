"""The selection rules of ``spec.select``, called directly on RunSpecs from real task and trial files (no pytest
session): the agent rule shared by tasks and trials, difficulty, validate mode, shards (with races kept whole),
collisions and rep-major order. The session-level proof of each rule stays in the pytester tests (test_builtin,
test_validate, test_shard, test_collect_guards, test_stats_session), serial and under ``-n 2``; the agent rule's
session is the last test here."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.trial import trial_toml

from pytest_agentrace.errors import SpecError
from pytest_agentrace.spec.builtin import builtin_tasks
from pytest_agentrace.spec.matrix import task_runs, trial_runs
from pytest_agentrace.spec.select import (
    Rules,
    choose_agents,
    collisions,
    override_effects,
    select_runs,
    validation_agents,
    wanted_agents,
)
from pytest_agentrace.spec.shard import Shard, assign
from pytest_agentrace.spec.task import load_task
from pytest_agentrace.spec.trial import load_trial

AGENTS = "[{name: bot, command: './bots/bot.py {prompt}', env: {FROM_FILE: kept}}, noop]"
# the ``ports`` trial of helpers.trial, its agent ``bot`` carrying a setting, and a second agent ``noop``
TRIAL = trial_toml(agent='env = { FROM_FILE = "kept" }', more='\n[[agents]]\nname = "noop"\n')


def task(tmp_path: Path, name: str, difficulty: str | None = None, agents: str = AGENTS, folder: str = ""):
    path = tmp_path / folder / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    level = f"difficulty: {difficulty}\n" if difficulty else ""
    path.write_text(f"name: {name}\ndescription: x\ntest_command: 'true'\n{level}agents: {agents}\n")
    return load_task(path)


def trial(tmp_path: Path):
    path = tmp_path / "trial.toml"
    path.write_text(TRIAL)
    (tmp_path / "docs").mkdir(exist_ok=True)  # the ``docs`` arm's overlay
    return load_trial(path)


def ids(runs) -> list[str]:
    return [spec.id for spec in runs]


# -- agents: one rule for tasks and trials -------------------------------------------------------------------------


def wanted(*specs: str):
    return wanted_agents(list(specs))


def test_without_the_option_a_file_runs_its_own_agents(tmp_path: Path) -> None:
    t = task(tmp_path, "t")
    assert choose_agents(t.agents, None, t.path) == t.agents
    assert [a.id for a in t.agents] == ["bot", "noop"]


def test_a_name_picks_the_files_entry_with_its_settings(tmp_path: Path) -> None:
    t = task(tmp_path, "t")
    (bot,) = choose_agents(t.agents, wanted("bot"), t.path)
    assert bot == t.agents[0] and bot.env == {"FROM_FILE": "kept"} and bot.command == ("./bots/bot.py", "{prompt}")


def test_a_name_the_file_does_not_list_runs_as_given(tmp_path: Path) -> None:
    t = task(tmp_path, "t")
    assert [(a.id, a.name, a.model) for a in choose_agents(t.agents, wanted("noop", "codex:gpt-5.4"), t.path)] == [
        ("noop", "noop", None),
        ("codex:gpt-5.4", "codex", "gpt-5.4"),
    ]


def test_a_whole_agent_replaces_the_files_entry_of_its_name(tmp_path: Path) -> None:
    t = task(tmp_path, "t")
    (bot,) = choose_agents(t.agents, wanted("{name: bot, command: other}"), t.path)
    assert (bot.id, bot.command, bot.env) == ("bot", ("other",), {})


def test_override_effects_say_whether_a_whole_agent_replaced_or_was_added(tmp_path: Path) -> None:
    t = task(tmp_path, "t")
    chosen = wanted("{name: bot, command: other}", "{name: slow, command: 'sleep 8'}", "noop", "claude")
    assert override_effects(t.agents, chosen) == {"bot": "replaced", "slow": "added"}  # plain names are no overrides
    assert override_effects(t.agents, None) == {}


def test_new_agents_get_ids_unique_against_the_files(tmp_path: Path) -> None:
    t = task(tmp_path, "t")
    chosen = choose_agents(t.agents, wanted("bot", "{name: bot, command: other}", "aider:a/b", "aider:a_b"), t.path)
    assert [a.id for a in chosen] == ["bot", "bot~2", "aider:a_b", "aider:a_b~2"]
    assert chosen[0] == t.agents[0]


def test_an_unknown_name_is_an_error_suggesting_the_files_agents(tmp_path: Path) -> None:
    t = task(tmp_path, "t")
    with pytest.raises(SpecError, match=r"unknown agent 'bto' \(did you mean 'bot'\?\); this file's agents: bot, noop"):
        choose_agents(t.agents, wanted("bto"), t.path)
    with pytest.raises(SpecError, match=r"unknown agent 'claud' \(did you mean 'claude'\?\)"):
        choose_agents(t.agents, wanted("claud"), t.path)


def test_no_agent_at_all_is_an_error(tmp_path: Path) -> None:
    t = task(tmp_path, "t", agents="[]")
    with pytest.raises(SpecError, match="key 'agents': no agents to run"):
        choose_agents(t.agents, None, t.path)
    assert [a.id for a in choose_agents(t.agents, wanted("claude"), t.path)] == ["claude"]


@pytest.mark.parametrize(
    "specs",
    [
        (),
        ("bot",),
        ("noop", "claude"),
        ("claude",),
        ("{name: bot, command: other}",),
        ("bot", "{name: bot, command: other}", "codex:m"),
    ],
)
def test_the_same_filter_chooses_the_same_agents_for_a_task_and_a_trial(tmp_path: Path, specs: tuple[str, ...]) -> None:
    t, tr = task(tmp_path, "t"), trial(tmp_path)
    assert t.agents == tr.agents  # the two files list the same agents
    assert choose_agents(t.agents, wanted(*specs), t.path) == choose_agents(tr.agents, wanted(*specs), tr.path)


def test_the_same_filter_errs_alike_for_a_task_and_a_trial(tmp_path: Path) -> None:
    t, tr = task(tmp_path, "t"), trial(tmp_path)
    messages = []
    for spec in (t, tr):
        with pytest.raises(SpecError) as err:
            choose_agents(spec.agents, wanted("bto"), spec.path)
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_validation_runs_oracle_and_noop() -> None:
    assert [a.id for a in validation_agents()] == ["oracle", "noop"]


# -- runs ------------------------------------------------------------------------------------------------------------


def test_difficulty_keeps_task_runs_of_the_wanted_levels_and_every_trial_run(tmp_path: Path) -> None:
    tasks = [
        task(tmp_path, name, level, "[noop]")
        for name, level in (("a", "easy"), ("b", "Medium"), ("c", None), ("d", "medium-hard"))
    ]
    runs = [spec for t in tasks for spec in task_runs(t, t.agents, 1)]
    tr = trial(tmp_path)
    runs += trial_runs(tr, tr.agents[:1], ["baseline"], 1)
    chosen = select_runs(runs, Rules(difficulty=("medium",)))
    assert ids(chosen.kept) == ["task:b/default/noop/r1", "trial:port/baseline/bot/r1"]
    assert [(spec.id, why) for spec, why in chosen.deselected] == [
        ("task:a/default/noop/r1", "difficulty easy, not medium"),
        ("task:c/default/noop/r1", "no difficulty, not medium"),
        ("task:d/default/noop/r1", "difficulty medium-hard, not medium"),
    ]
    assert chosen.warnings == () and chosen.plain


def test_medium_hard_is_a_level_of_its_own_among_the_builtins() -> None:
    """coderace's free-form levels: ``medium-hard`` is selected by its own name (case-insensitively), by neither
    ``medium`` nor ``hard`` (the built-in suite's task files, loaded)."""
    noop = wanted("noop")
    runs = [spec for t in builtin_tasks() for spec in task_runs(load_task(t.path), noop, 1)]
    levels = {spec.case: spec.spec.difficulty for spec in runs}

    def chosen(*wanted_levels: str) -> list[str]:
        return sorted(spec.case for spec in select_runs(runs, Rules(difficulty=wanted_levels)).kept)

    assert chosen("medium-hard") == chosen("Medium-Hard") == ["state-machine"]
    assert "state-machine" not in chosen("medium") + chosen("hard")
    assert chosen("medium", "medium-hard") == sorted(c for c, lv in levels.items() if lv in ("medium", "medium-hard"))


def test_a_level_no_task_has_is_a_warning(tmp_path: Path) -> None:
    runs = [
        *task_runs(task(tmp_path, "a", "easy"), wanted("noop"), 1),
        *task_runs(task(tmp_path, "b", "medium-hard"), wanted("noop"), 1),
    ]
    chosen = select_runs(runs, Rules(difficulty=("medium-hrad",)))
    assert chosen.kept == ()
    assert chosen.warnings == (
        "--agentrace-difficulty: no collected task has difficulty medium-hrad (did you mean "
        "'medium-hard'?); the tasks' levels are easy, medium-hard (levels match by name: "
        "medium-hard is neither medium nor hard)",
    )
    assert select_runs([], Rules(difficulty=("medium-hrad",))).warnings == ()  # nothing collected: nothing to say


def test_validate_keeps_task_runs_only(tmp_path: Path) -> None:
    t, tr = task(tmp_path, "t"), trial(tmp_path)
    runs = [*task_runs(t, validation_agents(), 1), *trial_runs(tr, tr.agents, ["baseline"], 1)]
    chosen = select_runs(runs, Rules(validate=True))
    assert ids(chosen.kept) == ["task:t/default/oracle/r1", "task:t/default/noop/r1"]
    assert [(s.id, why) for s, why in chosen.deselected] == [
        ("trial:port/baseline/bot/r1", "a trial run: --agentrace-validate runs tasks only"),
        ("trial:port/baseline/noop/r1", "a trial run: --agentrace-validate runs tasks only"),
    ]
    assert chosen.warnings == ("--agentrace-validate proves task files (each task's reference solution passes, no change "
                               "fails); the 2 trial run(s) collected were left out: a trial has no reference solution to validate",)
    assert select_runs(runs[:2], Rules(validate=True)).warnings == ()  # tasks alone: nothing to say


def test_shards_split_the_runs_by_run_id_and_keep_plain_tests_on_the_first(tmp_path: Path) -> None:
    tr = trial(tmp_path)
    runs = trial_runs(tr, tr.agents, ["baseline", "docs"], 3)  # 12 runs
    placed = assign(ids(runs), 3)
    parts = []
    for k in (1, 2, 3):
        chosen = select_runs(runs, Rules(shard=Shard(k, 3)))
        assert ids(chosen.kept) == [spec.id for spec in runs if placed[spec.id] == k]  # in collected order
        assert len(chosen.kept) == 4 and {why for _, why in chosen.deselected} == {f"another shard's run (shard {k}/3)"}
        assert chosen.plain == (k == 1)
        parts += ids(chosen.kept)
    assert sorted(parts) == sorted(ids(runs))
    assert select_runs(runs, Rules(shard=Shard(1, 1))).kept == tuple(runs)


def test_shards_balance_by_the_historys_durations(tmp_path: Path) -> None:
    """One slow cell (60 s a run) and three fast ones (10 s): each of 3 shards gets one of the slow cell's runs."""
    tr = trial(tmp_path)
    runs = trial_runs(tr, tr.agents[:1], ["baseline", "docs"], 3)
    history = {"trial:port/baseline/bot": 60.0, "trial:port/docs/bot": 10.0}
    for k in (1, 2, 3):
        kept = select_runs(runs, Rules(shard=Shard(k, 3), history=history)).kept
        assert [spec.arm for spec in kept].count("baseline") == 1


def test_a_race_stays_on_one_shard(tmp_path: Path) -> None:
    """Under race mode the unit is the race (case, arm, rep): its agents' runs go to one shard together."""
    tr = trial(tmp_path)
    runs = trial_runs(tr, tr.agents, ["baseline", "docs"], 3)  # 6 races of 2 agents
    shard_of: dict[tuple, set[int]] = {}
    for k in (1, 2):
        for spec in select_runs(runs, Rules(shard=Shard(k, 2), race=True)).kept:
            shard_of.setdefault((spec.case, spec.arm, spec.rep), set()).add(k)
    assert len(shard_of) == 6 and all(len(shards) == 1 for shards in shard_of.values())


def test_runs_of_two_files_sharing_a_results_folder_are_errors(tmp_path: Path) -> None:
    one, two = task(tmp_path, "same", folder="one"), task(tmp_path, "same", folder="two")
    other = task(tmp_path, "other")
    runs = [
        *task_runs(one, wanted("noop"), 1),
        *task_runs(two, wanted("noop"), 1),
        *task_runs(other, wanted("noop"), 1),
    ]
    chosen = select_runs(runs, Rules())
    assert chosen.kept == tuple(runs)  # kept: their items fail in setup with the message, never overwrite
    message = (
        f"{one.path} and {two.path} both have a task/question named 'same': their runs would share one results "
        "folder (runs/same/...) and overwrite each other; rename one (task 'name' / question 'id')"
    )
    assert [(spec.id, spec.source, text) for spec, text in chosen.errors] == [
        ("task:same/default/noop/r1", one.path, message),
        ("task:same/default/noop/r1", two.path, message),
    ]
    assert collisions(task_runs(one, wanted("noop", "bot"), 2)) == ()  # one file's own runs never collide


def test_one_file_collected_twice_is_two_runs(tmp_path: Path) -> None:
    t = task(tmp_path, "t")
    runs = [*task_runs(t, wanted("noop"), 1), *task_runs(t, wanted("noop"), 1)]
    assert runs[0] == runs[1]
    chosen = select_runs(runs, Rules())
    assert len(chosen.kept) == 2 and chosen.errors == ()  # the same source: pytest's duplicate, not a collision


def test_rep_major_order_puts_every_cells_early_reps_first(tmp_path: Path) -> None:
    tr = trial(tmp_path)
    runs = trial_runs(tr, tr.agents, ["baseline"], 2)
    assert ids(runs) == [
        "trial:port/baseline/bot/r1",
        "trial:port/baseline/bot/r2",
        "trial:port/baseline/noop/r1",
        "trial:port/baseline/noop/r2",
    ]
    assert ids(select_runs(runs, Rules(rep_major=True)).kept) == [
        "trial:port/baseline/bot/r1",
        "trial:port/baseline/noop/r1",
        "trial:port/baseline/bot/r2",
        "trial:port/baseline/noop/r2",
    ]
    assert select_runs(runs, Rules()).kept == tuple(runs)


def test_the_rules_apply_in_order(tmp_path: Path) -> None:
    """Difficulty before the shard (the shard splits what the filter kept), then rep-major order of what is left."""
    easy, hard = task(tmp_path, "e", "easy"), task(tmp_path, "h", "hard")
    runs = [*task_runs(easy, easy.agents, 2), *task_runs(hard, hard.agents, 2)]
    kept = []
    for k in (1, 2):
        chosen = select_runs(runs, Rules(difficulty=("hard",), shard=Shard(k, 2), rep_major=True))
        assert all(spec.case == "h" for spec in chosen.kept)
        assert [spec.rep for spec in chosen.kept] == sorted(spec.rep for spec in chosen.kept)
        kept += ids(chosen.kept)
    assert sorted(kept) == sorted(ids(task_runs(hard, hard.agents, 2)))


# -- the agent rule in a session -------------------------------------------------------------------------------------


def test_a_session_filters_a_tasks_and_a_trials_agents_alike(pytester: pytest.Pytester, xdist: list[str]) -> None:
    """``--agentrace-agent`` in one session over a task file and a trial file that list the same agents: the same
    agents run each (a plain name the files do not list too), and a misspelt name is one error per file."""
    task(pytester.path, "t")
    (pytester.path / "trial.toml").write_text(TRIAL)
    (pytester.path / "docs").mkdir()

    def agents_of(res: pytest.RunResult) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for line in res.stdout.lines:
            if "::" in line:
                path, _, name = line.partition("::")
                found.setdefault(path, set()).add(name.split("[")[1].rstrip("]").split("-")[-2])
        return found

    res = pytester.runpytest("--agentrace", "--collect-only", "-q", *xdist)
    assert agents_of(res) == {"t.yaml": {"bot", "noop"}, "trial.toml": {"bot", "noop"}}
    res = pytester.runpytest(
        "--agentrace", "--collect-only", "-q", "--agentrace-agent", "noop", "--agentrace-agent", "claude", *xdist
    )
    assert agents_of(res) == {"t.yaml": {"noop", "claude"}, "trial.toml": {"noop", "claude"}}
    res = pytester.runpytest("--agentrace", "--collect-only", "-q", "--agentrace-agent", "bto", *xdist)
    assert res.stdout.str().count("unknown agent 'bto' (did you mean 'bot'?); this file's agents: bot, noop") == 2
