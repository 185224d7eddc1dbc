"""The normalisers of cassettes: what varies by machine and session, in one table (``docs/cassettes.md``).

Two kinds, applied the same way to what a cassette stores and to the live requests it is matched against:

- **Placeholders** (``PLACEHOLDERS``): values of the recording run and machine (its paths and host facts),
  written as ``{{name}}`` when recording, in requests and responses alike. On replay the live requests get the
  same treatment with the replaying run's values, and the placeholders in recorded responses become the
  replaying run's values (``Portable.restore``): a Write tool's absolute path lands in the new workspace.
- **Marks** (``VOLATILE_KEYS``, ``VOLATILE_TEXT``, ``VOLATILE_HEADERS``): values that differ on every run (ids,
  timestamps, object addresses, temp-folder numbers, ...). ``normalise`` drops the keys and replaces the text by
  a mark such as ``<time>``; a recorded request is stored normalised, and strict matching compares
  ``normalise(recorded)`` with ``normalise(live)``. Responses are never marked: they are played byte for byte.

Host facts (``HostFacts.read``) come from the machine: ``getpass.getuser()``, ``socket.gethostname()``,
``platform.release()`` (kernel), ``platform.version()``, ``platform.platform()``, ``/etc/os-release``
(``platform.freedesktop_os_release``) and the user's home (``$HOME`` and the password database). A user or host
name that is also an everyday word (``COMMON_NAMES``, or shorter than 4 characters: ``root``, ``vm``, ...) is
replaced only where it stands as a name (a whole line, a path component, ``user@host``, ``NAME=value``,
``pytest-of-USER``, the host in ``uname -a``), so CLI prose such as "the root cause" stays; any other is replaced
as a whole word.
"""

from __future__ import annotations

import dataclasses
import functools
import getpass
import json
import os
import platform
import pwd
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace import untrusted

# placeholder -> what it stands for (docs/cassettes.md has the same table)
PLACEHOLDERS = {
    "{{workspace}}": "the run's workspace (the agent's cwd)",
    "{{workspace-dashed}}": "the workspace path with every character but letters and digits as '-' (Claude Code's "
                            "project folder: ~/.claude/projects/-tmp-...-ws/memory)",
    "{{home}}": "the HOME the CLI sees (the run's own, or the sandbox's /home/agentrace)",
    "{{basetemp}}": "pytest's basetemp of the session (the parent of the run's scratch folder)",
    "{{results}}": "the session's results folder (--agentrace-out)",
    "{{user-home}}": "the session user's own home ($HOME, the password database's)",
    "{{platform}}": "platform.platform(): Linux-6.8.0-49-generic-x86_64-with-glibc2.39",
    "{{os}}": "the OS's names in /etc/os-release (PRETTY_NAME, NAME VERSION, 'Debian 12.0.0')",
    "{{os-version}}": "platform.version(): the kernel build ('#1 SMP PREEMPT_DYNAMIC ...')",
    "{{kernel}}": "platform.release(): 6.8.0-49-generic",
    "{{user}}": "getpass.getuser()",
    "{{host}}": "socket.gethostname()",
}
WORKSPACE, WORKSPACE_DASHED, HOME = "{{workspace}}", "{{workspace-dashed}}", "{{home}}"
BASETEMP, RESULTS, USER_HOME = "{{basetemp}}", "{{results}}", "{{user-home}}"
PLATFORM, OS, OS_VERSION, KERNEL, USER, HOST = ("{{platform}}", "{{os}}", "{{os-version}}", "{{kernel}}", "{{user}}",
                                                "{{host}}")
# names that are everyday words too: replaced only where they stand as a name (see the module docstring)
COMMON_NAMES = frozenset({
    "root", "admin", "user", "users", "test", "tests", "runner", "ubuntu", "debian", "fedora", "node", "build",
    "docker", "app", "dev", "guest", "ci", "vm", "host", "server", "default", "local", "linux", "worker", "agent",
    "nobody", "daemon", "main", "home", "sandbox", "box", "container", "pc", "desktop", "laptop", "work",
})
# folders too general to stand for one machine's path (never replaced)
GENERAL_PATHS = frozenset({"", "/", "/tmp", "/var", "/var/tmp", "/home", "/usr", "/opt", "/etc", "/private",
                           "/private/tmp", "/Users"})

# --- marks: volatile keys and text --------------------------------------------------------------------------

VOLATILE_KEYS = frozenset({
    "id", "call_id", "tool_use_id", "tool_call_id", "callID", "previous_response_id", "response_id",
    "session_id", "sessionId", "conversation_id", "request_id", "requestId", "user_id", "userId", "user",
    "metadata", "client_metadata", "prompt_cache_key", "safety_identifier", "cache_control", "cacheControl",
    "timestamp", "created", "created_at", "createdAt", "time", "installation_id", "thread_id", "turn_id",
})
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_MON = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_DY = "Mon|Tue|Wed|Thu|Fri|Sat|Sun"
VOLATILE_TEXT: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b\d{4}[-/]\d{2}[-/]\d{2}\b"), "<date>"),
    (re.compile(rf"\b(?:(?:{_DAYS}),? )?(?:{_MONTHS}|(?:{_MON})\.?) "
                r"\d{1,2}(?:st|nd|rd|th)?,? \d{4}\b"), "<date>"),
    # date(1) and ctime: "Wed Dec  2 00:23:55 UTC 2026"; RFC 2822: "Wed, 02 Dec 2026"
    (re.compile(rf"\b(?:{_DY}),? +(?:(?:{_MON}) +\d{{1,2}}|\d{{1,2}} +(?:{_MON})(?: +\d{{4}})?)\b"), "<date>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?(?: ?[AP]M)?\b"), "<time>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\b0x[0-9a-fA-F]{6,16}\b"), "0x<addr>"),  # object addresses: <object object at 0x7f6a085a49e0>
    (re.compile(r"\b[0-9a-f]{16,}\b"), "<hex>"),
    (re.compile(r"\bses_[0-9A-Za-z]{16,}\b"), "<session>"),  # OpenCode's session ids
    (re.compile(r"\b\d+\.\d+\s?(?:ms|s|seconds?|milliseconds?)\b"), "<duration>"),
    (re.compile(r"\bChunk ID: \w+"), "Chunk ID: <id>"),  # Codex 0.171.0 exec_command output: a random id per call
    # Codex 0.171.0 exec_command output: the output's size in tokens (a longer path, a longer output)
    (re.compile(r"\b(Original token count:? )\d+"), r"\1<n>"),
    (re.compile(r"\b(PGID|PID|pid)(:? ?)\d+"), r"\1\2<pid>"),  # Gemini CLI 0.61.0 shell output: "Process Group PGID: N"
    # temp folders: pytest's numbered ones, mktemp(1)'s tmp.<10 random characters>, Python tempfile's tmp<8 random>
    (re.compile(r"\bpytest-of-[^/\s]+/pytest-\d+\b"), "pytest-of-<user>/pytest-<n>"),
    (re.compile(r"(?<=/)popen-gw\d+\b"), "popen-gw<n>"),
    (re.compile(r"\btmp\.[A-Za-z0-9]{10}\b"), "tmp.<x>"),
    (re.compile(r"(?<=/)tmp[a-z0-9_]{8}\b"), "tmp<x>"),
    # the host's kernel in the CLIs' environment prompts ("OS Version: Linux 6.8.0-49-generic"): another machine
    (re.compile(r"\b(Linux|Darwin) \d+\.\d+[\w.+~-]*"), r"\1 <version>"),
    # platform lines of system prompts ("Platform: linux", "OS: linux, Shell: bash", "Operating System: linux")
    (re.compile(r"(?i)\b(platform|os|operating system|operating system is)(:? )(linux|darwin|macos|win32|windows)\b"),
     r"\1\2<platform>"),
    (re.compile(r"\b(Shell:? )(?:/[\w/.-]*/)?(bash|zsh|sh|fish|dash|ksh|tcsh|pwsh|powershell)\b"), r"\1<shell>"),
)
# header names whose values are ids of the session, request or installation (stored as "<id>")
VOLATILE_HEADERS = re.compile(r"(?i)session|affinity|installation|request-id|trace|window-id|turn-metadata")


def normalise_text(value: str) -> str:
    """``value`` with ``VOLATILE_TEXT`` replaced by marks (``<date>``, ``<time>``, ``<uuid>``, ``0x<addr>``, ...).
    Idempotent: a normalised text normalises to itself."""
    for pattern, mark in VOLATILE_TEXT:
        value = pattern.sub(mark, value)
    return value


def normalise(value: Any) -> Any:
    """A JSON value with ``VOLATILE_KEYS`` dropped at any depth and every string passed through
    ``normalise_text``; a string that holds JSON is normalised as that JSON (tool arguments). Idempotent."""
    if isinstance(value, str):
        if value[:1] in "{[" and len(value) > 1:
            try:
                return normalise(untrusted.loads(value))
            except ValueError:
                pass
        return normalise_text(value)
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def normalise_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers as stored: values of ``VOLATILE_HEADERS`` as ``<id>``, the others through ``normalise`` (a header
    that holds JSON stays a JSON string)."""
    out = {}
    for k, v in headers.items():
        if VOLATILE_HEADERS.search(k):
            out[k] = "<id>"
        else:
            got = normalise(v)
            out[k] = got if isinstance(got, str) else json.dumps(got, separators=(",", ":"))
    return out


# --- placeholders: this run's paths and this machine's facts ------------------------------------------------


@dataclass(frozen=True)
class HostFacts:
    """What a cassette must not hold of the machine: ``user``, ``host``, ``kernel`` (``platform.release()``),
    ``os_version`` (``platform.version()``), ``platform`` (``platform.platform()``), ``os_names`` (names from
    ``/etc/os-release``), ``os_short`` (``NAME VERSION_ID`` there, also matched with more version parts),
    ``user_homes`` (``$HOME`` and the password database's home). Empty strings: unknown."""

    user: str = ""
    host: str = ""
    kernel: str = ""
    os_version: str = ""
    platform: str = ""
    os_names: tuple[str, ...] = ()
    os_short: str = ""  # NAME's first word and VERSION_ID ("Debian 12"), as in user agents ("Debian 12.0.0")
    user_homes: tuple[str, ...] = ()

    @staticmethod
    def read() -> HostFacts:
        """This machine's facts; a fact that cannot be read is left empty. ``$HOME`` is read at each call, the
        rest once per process."""
        homes = [os.environ.get("HOME", ""), *_machine().user_homes]
        return dataclasses.replace(_machine(), user_homes=tuple(dict.fromkeys(h.rstrip("/") for h in homes if h)))


def _safe(fn: Any) -> str:
    try:
        return str(fn() or "").strip()
    except Exception:  # noqa: BLE001 - an unreadable fact is simply not replaced
        return ""


@functools.cache
def _machine() -> HostFacts:
    try:
        rel = platform.freedesktop_os_release()
    except OSError:
        rel = {}
    names = [rel.get("PRETTY_NAME", ""), " ".join(filter(None, (rel.get("NAME"), rel.get("VERSION"))))]
    home = _safe(lambda: pwd.getpwuid(os.getuid()).pw_dir)
    first, version = (rel.get("NAME") or "").partition(" ")[0], rel.get("VERSION_ID") or ""
    short = f"{first} {version}" if len(first) >= 3 and version else ""
    return HostFacts(user=_safe(getpass.getuser), host=_safe(socket.gethostname), kernel=_safe(platform.release),
                     os_version=_safe(platform.version), platform=_safe(platform.platform),
                     os_names=tuple(dict.fromkeys(n for n in names if len(n) >= 4)), os_short=short,
                     user_homes=(home,) if home else ())


def dashed(path: str) -> str:
    """``path`` as Claude Code names a project folder: every character but ASCII letters and digits as ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def _name_rules(name: str, mark: str, host: bool) -> list[tuple[re.Pattern[str], str]]:
    """Where a user or host name is replaced (see the module docstring)."""
    if not name or name == "localhost":
        return []
    n = re.escape(name)
    if len(name) >= 4 and name.lower() not in COMMON_NAMES:
        return [(re.compile(rf"(?<![\w-]){n}(?![\w-])"), mark)]
    rules = [rf"(?m)^{n}$", rf"(?<=[/\\]){n}(?=[/\\\s\"':]|$)", rf"(?<==){n}\b", rf"(?<=pytest-of-){n}\b"]
    rules += [rf"(?<=@){n}\b", rf"(?<=\bLinux ){n}(?= )"] if host else [rf"\b{n}(?=@)"]
    return [(re.compile(r), mark) for r in rules]


def _path_rule(path: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.<-])" + re.escape(path) + r"(?![\w-])")  # not "</root>" nor "/x/root"


@dataclass(frozen=True)
class Portable:
    """The placeholder rules of one run: ``rules`` (pattern, placeholder) applied in order by ``apply``;
    ``targets`` (placeholder, value) put back by ``restore``."""

    rules: tuple[tuple[re.Pattern[str], str], ...] = ()
    targets: tuple[tuple[str, str], ...] = ()

    @classmethod
    def make(cls, workspace: Path | str | None = None, home: Path | str | None = None,
             other_homes: Iterable[Path | str] = (), basetemp: Path | str | None = None,
             results: Path | str | None = None, facts: HostFacts | None = None) -> Portable:
        """Rules for a run: ``workspace``, ``home`` (the HOME the CLI sees, restored), ``other_homes`` (replaced,
        never restored), ``basetemp``, ``results`` (paths as given and resolved, the longest first, so the
        workspace wins inside the basetemp); then ``facts`` (``HostFacts.read()`` when None)."""
        facts = HostFacts.read() if facts is None else facts
        pairs: dict[str, str] = {}

        def add(value: Path | str | None, mark: str) -> None:
            if value:
                for p in {str(value), os.path.realpath(value)}:
                    p = p.rstrip("/")
                    if p not in GENERAL_PATHS:
                        pairs[p] = mark
        for h in facts.user_homes:
            add(h, USER_HOME)
        add(results, RESULTS)
        add(basetemp, BASETEMP)
        for h in (*other_homes, home):
            add(h, HOME)
        add(workspace, WORKSPACE)  # the workspace wins where two are the same folder
        paths = sorted(pairs.items(), key=lambda kv: len(kv[0]), reverse=True)
        rules = [(_path_rule(p), m) for p, m in paths]
        rules += [(_path_rule(dashed(p)), WORKSPACE_DASHED) for p, m in paths if m == WORKSPACE]
        for value, mark in ((facts.platform, PLATFORM), *((n, OS) for n in facts.os_names),
                            (facts.os_version, OS_VERSION), (facts.kernel, KERNEL)):
            if len(value) >= 5:
                rules.append((re.compile(re.escape(value)), mark))
        if facts.os_short:
            rules.append((re.compile(rf"\b{re.escape(facts.os_short)}(?:\.\d+)*\b"), OS))
        rules += _name_rules(facts.host, HOST, host=True) + _name_rules(facts.user, USER, host=False)
        targets: list[tuple[str, str]] = []
        if workspace:
            ws = str(workspace).rstrip("/")
            targets += [(WORKSPACE, ws), (WORKSPACE_DASHED, dashed(ws))]
        for value, mark in ((home, HOME), (basetemp, BASETEMP), (results, RESULTS),
                            (facts.user_homes[0] if facts.user_homes else None, USER_HOME)):
            if value:
                targets.append((mark, str(value).rstrip("/")))
        targets += [(m, v) for v, m in ((facts.platform, PLATFORM), (facts.os_names[0] if facts.os_names else "", OS),
                                        (facts.os_version, OS_VERSION), (facts.kernel, KERNEL), (facts.user, USER),
                                        (facts.host, HOST)) if v]
        return cls(tuple(rules), tuple(targets))

    def apply(self, value: str) -> str:
        """``value`` with this run's paths and this machine's facts as placeholders."""
        for pattern, mark in self.rules:
            value = pattern.sub(mark, value)
        return value

    def restore(self, value: str) -> str:
        """``value`` with the placeholders as this run's paths and this machine's facts."""
        if "{{" not in value:
            return value
        for mark, target in self.targets:
            value = value.replace(mark, target)
        return value
