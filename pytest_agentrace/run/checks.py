"""Check commands (test / verify / lint / setup / prepare): run a shell string in the workspace, keep a log, and
tell a check that ran and found problems from one whose tool is missing.

Environment (``clean_env``): an allow-list of the session's environment (``minimal_env``: PATH, HOME, LANG/LC_*,
TERM, TZ, TMPDIR, no_proxy with loopback) plus the task's and agent's ``env``, with the folder of the
session's interpreter (``sys.executable``) first on ``PATH``, as tox and nox do for their sessions: a check's
``python`` (and ``pytest``, ``ruff``, ... installed beside it) is the one pytest runs on, also when its virtual
environment is not activated (``.venv/bin/python -m pytest --agentrace``). A command naming an absolute
interpreter keeps it.

A missing tool (``missing_tool``) is the harness's or the host's fault, never the agent's: the run is an
``error`` that names the command and the tool. The signs: exit 127 (command not found) or 126 (found but not
executable) from the shell, a ``command not found`` / ``not found`` line from it naming a program the command
itself runs (``_programs``: the graded code's output can name anything), and Python's
``No module named X`` for a ``python -m X`` command when X is the tool the command names. Those signs are the
command's output, which the agent's code can print: the harness then looks for the tool itself
(``tool_present``), and only a tool it cannot find either makes the run an ``error``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_agentrace.record.model import CheckResult
from pytest_agentrace.record.redact import redact
from pytest_agentrace.record.safefile import read_text, write_text
from pytest_agentrace.run import counting, process
from pytest_agentrace.run.discard import remove
from pytest_agentrace.run.limits import Confinement, diagnose
from pytest_agentrace.run.sandbox import exit_code as sandbox_exit_code

NOT_FOUND_EXIT = 127  # POSIX shells: command not found
NOT_EXECUTABLE_EXIT = 126  # POSIX shells: found but cannot be executed
LOG_HEAD = LOG_TAIL = 256 * 1024  # bytes of a check's output kept in its log


def session_bin() -> str:
    """The folder of the session's interpreter (``sys.executable``), put first on every check's ``PATH``."""
    return os.path.dirname(os.path.abspath(sys.executable))


# and LC_*; the Python settings name how the session's interpreter behaves (no bytecode files in a workspace), no secret
BASE_VARS = ("PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "NO_PROXY", "no_proxy",
             "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONHASHSEED")
LOOPBACK = ("127.0.0.1", "localhost", "::1")  # always in no_proxy: the model double and the bridge listen there


def loopback_no_proxy(value: str | None) -> str:
    """``value`` (a ``no_proxy`` list) with the loopback names added once: the same for agents and checks."""
    entries = [e.strip() for e in (value or "").split(",") if e.strip()]
    return ",".join(dict.fromkeys([*LOOPBACK, *entries]))


def minimal_env(base: Mapping[str, str] | None = None, keep: Sequence[str] = ()) -> dict[str, str]:
    """The variables of ``base`` (default ``os.environ``) every command may see: ``BASE_VARS`` and ``LC_*``, plus
    those whose name starts with one of ``keep`` (an adapter's provider prefixes, ``agents.base.Adapter.env_keep``);
    ``no_proxy``/``NO_PROXY`` hold the loopback names whatever the session set."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if k in BASE_VARS or k.startswith("LC_") or (keep and k.startswith(tuple(keep)))}
    no_proxy = loopback_no_proxy(base.get("no_proxy") or base.get("NO_PROXY"))
    env["no_proxy"] = env["NO_PROXY"] = no_proxy
    return env


def clean_env(base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for agents and checks: ``minimal_env(base)`` (an allow-list: the session's provider keys and
    everything else stay out), with ``session_bin()`` first on ``PATH``, plus ``extra`` (the task's and agent's
    ``env``; a ``PATH`` in ``extra`` wins as given)."""
    env = minimal_env(base)
    parts = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p]
    env["PATH"] = os.pathsep.join([session_bin(), *(p for p in parts if p != session_bin())])
    env.update(extra or {})
    return env


Box = Callable[[list[str], dict[str, str]], tuple[list[str], dict[str, str]]]  # (argv, env) -> sandboxed (argv, env)
Confine = Callable[[], Confinement]  # a fresh confinement (run.limits.confine) for one command


def run_check(name: str, command: str, ws: Path, env: Mapping[str, str], timeout: float, log: Path, secrets=(),
              box: Box | None = None, limits: Confine | None = None, reports: Path | None = None,
              hidden: Sequence[str] = ()) -> CheckResult:
    """Run ``command`` through ``/bin/sh -c`` in ``ws`` with ``timeout`` seconds (inside ``box``, the run's sandbox,
    when given; within the run's resource limits when ``limits`` makes them: checks run the agent's code); write its
    output to ``log``, which names a limit the command hit on its last line.

    With ``reports`` (a folder of the harness, emptied here) a pytest command is counted (``run.counting``): the
    harness's JUnit report is written there and the check passes only when its report says so; ``hidden`` are the
    test keys (``counting.hidden_tests``) that must all have run. Other commands keep the exit-code rule.

    Returns a ``CheckResult`` whose ``missing`` names the tool when the command could not run it
    (``missing_tool``). The log starts with the command line run and ends with the exit status.
    """
    run_command, report = command, None
    if reports is not None and counting.pytest_argv(command):
        remove(reports)  # what an earlier check's code left there: a link, a file, a folder at mode 000
        reports.mkdir(parents=True)
        report = reports / counting.REPORT_NAME
        run_command = counting.counted_command(command, report)
    argv: str | list[str] = run_command
    given_env = dict(env)
    if box is not None:
        argv, env = box(["/bin/sh", "-c", run_command], dict(env))
    confined = limits() if limits is not None else None
    try:
        res = process.run(argv, cwd=ws, env=env, timeout=timeout, head=LOG_HEAD, tail=LOG_TAIL,
                          preexec_fn=confined.preexec if confined else None,
                          watch=confined.watch if confined and confined.disk_watch else None)
        events, stopped = (confined.hits(), res.stopped or confined.final_check()) if confined else ({}, None)
    finally:
        if confined is not None:
            confined.close()
    if box is not None:  # bwrap's 128+N for a signal becomes -N, as without the sandbox
        res = dataclasses.replace(res, exit_code=sandbox_exit_code(res.exit_code))
    hit = diagnose(confined.limits, res.exit_code, res.stderr + "\n" + res.stdout[-65536:], stopped, events,
                   confined.evidence(stopped)) \
        if confined is not None else None
    status = "timed out" if res.timed_out else (res.error or f"exit {res.exit_code}")
    if hit is not None:
        status += f"; {hit.reason}"
    count, failure = None, None
    if report is not None:
        count = counting.read_report(report)
        failure = counting.verdict(count, hidden)
        status += f"; {failure or 'report: ' + str(count.ran) + ' tests ran, all passed'}"  # type: ignore[union-attr]
    body = f"$ {run_command}\n{res.stdout}"
    if res.stderr:
        body += f"\n--- stderr ---\n{res.stderr}"
    body += f"\n--- {status} after {res.seconds:.2f}s ---\n"
    write_text(log, redact(body, secrets))
    missing = None if res.timed_out else missing_tool(command, res.exit_code, res.stdout + "\n" + res.stderr)
    # the look shares the check's time: what the command left of its timeout
    if missing is not None and tool_present(command, missing, ws, given_env, box, timeout - res.seconds):
        missing = None  # the output said so, but the tool is there: the command's own code failed
    return CheckResult(name, command, res.exit_code, round(res.seconds, 3), log.name, res.timed_out, missing,
                       hit.reason if hit is not None else None, counted=report is not None,
                       tests=count.to_dict() if count is not None else None, count_failure=failure)


def run_commands(name: str, commands: tuple[str, ...], cwd: Path, env: Mapping[str, str], timeout: float, log: Path,
                 secrets=(), box: Box | None = None) -> CheckResult:
    """Run ``commands`` in order, stopping at the first that fails; one log holds every command's output.

    Returns one ``CheckResult`` named ``name`` whose ``command``, exit code and ``missing`` are the failing (or
    last) command's and whose ``seconds`` is the total. ``commands`` must not be empty.
    """
    texts, total, res = [], 0.0, None
    for command in commands:
        res = run_check(name, command, cwd, env, timeout, log, secrets, box)
        texts.append(read_text(log) or "")
        total += res.seconds
        if not res.passed:
            break
    if res is None:
        raise ValueError(f"no {name} commands to run")
    write_text(log, "".join(texts))
    return dataclasses.replace(res, seconds=round(total, 3))


_NOT_FOUND_RE = re.compile(r"(?m)^(?:\S*sh: (?:line \d+: |\d+: )?)?([^\s:]+): (?:command )?not found\s*$")
_NO_MODULE_RE = re.compile(r"No module named '?([\w.]+)'?")


def missing_tool(command: str, exit_code: int | None, output: str) -> str | None:
    """The tool ``command`` could not run, or None when it ran (whatever it found). See the module docstring.

    >>> missing_tool("python -m ruff check .", 1, "/usr/bin/python: No module named ruff")
    'ruff'
    """
    programs = _programs(command)
    if exit_code in (NOT_FOUND_EXIT, NOT_EXECUTABLE_EXIT):
        m = _NOT_FOUND_RE.search(output)
        if m is None:
            return _first_word(command)
        return m.group(1) if m.group(1) in programs else None  # a name the command does not run: the code's own
    if exit_code in (None, 0):
        return None
    m = _NOT_FOUND_RE.search(output)
    if m and m.group(1) in programs:
        return m.group(1)
    for _, module in _python_m(command):
        found = _NO_MODULE_RE.search(output)
        if found and found.group(1).split(".")[0] == module.split(".")[0]:
            return module
    return None


PROBE_TIMEOUT = 30.0  # seconds at most for ``tool_present``'s look


def tool_present(command: str, tool: str, cwd: Path, env: Mapping[str, str], box: Box | None = None,
                 timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether ``tool``, which ``missing_tool`` read from a check's output as missing, is there after all: looked
    for by the harness in ``/`` (none of the workspace's code runs), in the same ``box`` and environment as the
    check. A check's output is the agent's code's to write: code that prints ``No module named pytest`` and exits
    must not turn its run into an ``error``, which is never counted. A ``python -m X`` tool is X's module spec
    (``importlib.util.find_spec``) under the command's interpreter, another one ``command -v``; a relative path
    (``./gradlew``) is the workspace's, where a missing file is the change's doing: counted as present.

    ``timeout``: seconds the look may take (``run_check`` gives what the check left of its own timeout; at most
    ``PROBE_TIMEOUT``). The tool counts as missing only when the look ran to its end and did not find it: with no
    time left, or a look that timed out or could not start, it is present (the check's failure stays the change's,
    and code that spends the check's time before printing a missing tool gains nothing)."""
    if ("/" in tool and not tool.startswith("/")) or timeout <= 0:
        return True
    python = next((py for py, module in _python_m(command) if module == tool), None)
    if python is not None:
        script = ('cd / && exec "$1" -c "import importlib.util, sys; '
                  'sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)" "$2"')
        argv = ["/bin/sh", "-c", script, "sh", python, tool]
    else:
        argv = ["/bin/sh", "-c", 'cd / && command -v "$1" >/dev/null', "sh", tool]
    run_env = dict(env)
    if box is not None:
        argv, run_env = box(argv, run_env)
    res = process.run(argv, cwd=cwd, env=run_env, timeout=min(timeout, PROBE_TIMEOUT))
    return res.timed_out or res.exit_code in (None, 0)


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


_SEPARATORS = frozenset({"&&", "||", ";", "|", "(", ")", "{", "}", "!", "then", "do", "else"})
_WRAPPERS = frozenset({"env", "exec", "command", "nice", "time", "timeout", "stdbuf", "nohup", "xvfb-run"})


def _programs(command: str) -> set[str]:
    """The programs ``command`` itself runs: the first word of each of its simple commands (after ``&&``, ``||``,
    ``;``, ``|``; ``VAR=value`` assignments skipped; after a wrapper such as ``env``, ``exec`` or ``timeout`` its
    next word too). A name the check's output says is missing counts only when it is one of these: the graded
    code's output can name anything (``test_calc.py: not found``, a made-up tool)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = command.split()
    found: set[str] = set()
    start = True  # the next word may be a program: a command's start, or the word after a wrapper
    for word in words:
        if word in _SEPARATORS or set(word) <= set("&|;()"):
            start = True
        elif start and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word) or word.startswith("-")
                        or re.fullmatch(r"\d+(?:\.\d+)?[smhd]?", word)):
            continue  # an assignment, or a wrapper's option (timeout 30, nice -n 5)
        elif start:
            found.add(word)
            start = word in _WRAPPERS
    return found


def _first_word(command: str) -> str:
    words = _words(command)
    return words[0] if words else command


def _python_m(command: str) -> list[tuple[str, str]]:
    """``(interpreter, X)`` of every ``python[3[.N]] -m X`` in ``command`` (also after ``&&``, ``;`` or an absolute
    path)."""
    words, found = _words(command), []
    for i, word in enumerate(words[:-2]):
        if re.fullmatch(r"(?:.*/)?python(?:\d+(?:\.\d+)?)?", word) and words[i + 1] == "-m":
            found.append((word, words[i + 2]))
    return found


def log_tail(run_dir: Path, check: CheckResult | None, lines: int = 20) -> str:
    """The last ``lines`` lines of a check's log (empty when there is none)."""
    if check is None or not check.log:
        return ""
    text = read_text(run_dir / check.log)
    if text is None:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])
