"""Helpers for the trial tests: a real git repo, an overlay, and a fake agent script that answers from its
workspace and logs what it saw (argv, cwd, TRIAL_* env, prompt) to ``$TRIAL_OUT/agent-log/<TRIAL_ID>.json``."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import git, make_repo, write_script

# The fake agent: its answer is ANSWER.txt of the workspace (so overlays and repo mappings decide it),
# followed by CLAIM.txt when the prompt asks for a verification claim. Behaviour switches via env:
# BOT_EXIT (exit code), BOT_SLEEP (seconds), BOT_WRITE (write that file into the workspace),
# BOT_WAIT_FOR (when the workspace has a file WAIT: append its pid to BOT_WAITING, block until BOT_WAIT_FOR exists;
# relative paths are beside the results folder).
BOT = r"""
import json, os, pathlib, sys, time
prompt = sys.argv[1]
ws = pathlib.Path.cwd()
rec = {
    "argv": sys.argv[1:], "cwd": str(ws), "prompt": prompt,
    "env": {k: v for k, v in os.environ.items() if k.startswith(("TRIAL_", "BOT_", "FOO"))},
    "files": sorted(str(p.relative_to(ws)) for p in ws.rglob("*") if p.is_file() and ".git" not in p.parts),
}
log = pathlib.Path(os.environ["TRIAL_OUT"]) / "agent-log"
log.mkdir(parents=True, exist_ok=True)
(log / (os.environ["TRIAL_ID"] + ".json")).write_text(json.dumps(rec))
if os.environ.get("BOT_WAIT_FOR") and (ws / "WAIT").exists():
    base = pathlib.Path(os.environ["TRIAL_OUT"]).parent  # relative paths: beside the results folder
    with open(base / os.environ["BOT_WAITING"], "a") as fh:
        fh.write(f"{os.getpid()}\n")
    while not (base / os.environ["BOT_WAIT_FOR"]).exists():
        time.sleep(0.05)
time.sleep(float(os.environ.get("BOT_SLEEP", "0")))
if os.environ.get("BOT_WRITE"):
    (ws / os.environ["BOT_WRITE"]).write_text("written by the bot\n")
answer = (ws / "ANSWER.txt").read_text() if (ws / "ANSWER.txt").exists() else "I do not know."
print(answer.strip())
if "VERIFICATION:" in prompt and (ws / "CLAIM.txt").exists():
    print((ws / "CLAIM.txt").read_text().strip())
sys.exit(int(os.environ.get("BOT_EXIT", "0")))
"""


def make_project(root: Path) -> Path:
    """``app`` (git repo: ANSWER says 8080), ``other`` (git repo: ANSWER says 9090), ``docs`` overlay (ANSWER says
    8123), and ``bots/bot.py``. Returns ``root``."""
    make_repo(root / "app", {"app.py": "PORT = 8123\n", "ANSWER.txt": "The port is 8080.\n"})
    make_repo(root / "other", {"app.py": "PORT = 9090\n", "ANSWER.txt": "The port is 9090.\n"})
    (root / "docs").mkdir()
    (root / "docs" / "ANSWER.txt").write_text("The server listens on port 8123.\n")
    write_script(root / "bots" / "bot.py", BOT)
    return root


def tag_second_commit(repo: Path, answer: str) -> None:
    """Tag the current commit ``v1``, then commit a new ANSWER.txt on top (HEAD differs from v1)."""
    git(repo, "tag", "v1")
    (repo / "ANSWER.txt").write_text(answer)
    git(repo, "commit", "-qam", "second")


TRIAL = """\
name = "ports"

[defaults]
reps = {reps}
timeout = 30
{defaults}

[[repos]]
name = "app"
source = "app"

[[repos]]
name = "other"
source = "other"

[[arms]]
name = "baseline"
{baseline}

[[arms]]
name = "docs"
overlay = "docs"
{docs}

[[agents]]
name = "bot"
command = ["./bots/bot.py", "{{prompt}}"]
{agent}

[[questions]]
id = "port"
repo = "app"
prompt = "Which port does the server listen on?"
{expect}
{question}
"""


def trial_toml(reps: int = 1, defaults: str = "", baseline: str = "", docs: str = "", agent: str = "", question: str = "", more: str = "", expect: str = '["8123", "listens"]') -> str:
    """The ``ports`` trial: arms baseline and docs (overlay), agent ``bot``, question ``port`` on repo ``app``;
    each argument is TOML text added to that table (``expect``: the question's expect list)."""
    return TRIAL.format(reps=reps, defaults=defaults, baseline=baseline, docs=docs, agent=agent, question=question, expect=f"expect = {expect}") + more


def runs(out: Path) -> dict[str, dict]:
    """``{run_id: run.json dict}`` for every run record under ``out``."""
    return {d["run_id"]: d for d in (json.loads(p.read_text()) for p in sorted(out.glob("runs/**/run.json")))}


def agent_logs(out: Path) -> list[dict]:
    """What the fake agents logged: in ``$TRIAL_OUT/agent-log``, the results folder (no sandbox) or, in the sandbox,
    each run's outbox, copied into its record folder's ``outbox/``."""
    return [json.loads(p.read_text()) for p in sorted(out.glob("**/agent-log/*.json"), key=lambda p: p.name)]


def trial_rows(text: str) -> list[list[str]]:
    """Cells of the rows of the per-cell trial table(s) (``report.trials``) in a session's output."""
    rows: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("| Question "):
            inside = True
        elif inside and line.startswith("|"):
            if not line.startswith("|--"):
                rows.append([c.strip() for c in line.strip("|").split("|")])
        else:
            inside = False
    return rows
