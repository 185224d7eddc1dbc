"""Read what a CLI's request offers and holds, and map script steps onto the tools it offered.

Four wire protocols (``PROTOCOLS``) share these helpers:

- ``offered_tools``: tool name -> JSON schema of its arguments (``None`` when unknown), from ``tools`` in
  the request (Anthropic ``{name, input_schema}``, Responses ``{type, name, parameters}``, Chat
  ``{type: function, function: {name, parameters}}``, Gemini ``[{functionDeclarations: [...]}]``; the
  recorded sample bodies abbreviate tools to bare names, which are accepted too);
- ``count_tool_results``: how many tool results the conversation already holds: this picks the script step,
  so the double keeps no state between requests (Anthropic ``tool_result`` blocks, Responses
  ``function_call_output``/``custom_tool_call_output`` items, Chat ``role: tool`` messages, Gemini
  ``functionResponse`` parts; ``model-double.md``, "The script the server plays");
- ``tool_call``: the (name, arguments) for a ``shell`` or ``write`` step, using the first fitting tool in
  ``SHELL_TOOLS`` / ``WRITE_TOOLS``. A CLI's own write tool is used only to create a file, with an absolute
  path, when the request names the workspace directory (``workspace_dir``): Claude Code's ``Write`` and
  OpenCode's ``write`` refuse to overwrite a file the session has not read ("File has not been read yet"),
  and Copilot's ``create`` needs an existing parent, so a write over an existing file, into a missing
  folder, or where the workspace is unknown, becomes a shell command. The
  double runs on the agent's machine (inside its network namespace too), so it can see whether the file
  exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_agentrace.model_double.script import Step

ANTHROPIC, RESPONSES, CHAT, GEMINI = "anthropic", "responses", "chat", "gemini"
PROTOCOLS = (ANTHROPIC, RESPONSES, CHAT, GEMINI)


@dataclass(frozen=True)
class ToolCall:
    """A tool call the double answers with: the CLI's tool ``name`` and its ``arguments`` (a JSON object)."""

    name: str
    arguments: dict[str, Any]


# (tool name, required argument names, builder(command, description) -> arguments), in order of preference.
# Names and argument shapes as offered by: Claude Code 2.1.197 (Bash), Codex 0.171.0 (exec_command; older builds:
# shell with an argv list, shell_command), Gemini CLI 0.61.0 (run_shell_command), OpenCode 1.18.33 and Copilot CLI
# 1.0.102 (bash), Cursor (run_terminal_cmd): model-double.md and the recorded request bodies.
SHELL_TOOLS: tuple[tuple[str, tuple[str, ...], Callable[[str, str], dict[str, Any]]], ...] = (
    ("Bash", ("command",), lambda c, d: {"command": c, "description": d}),
    ("exec_command", ("cmd",), lambda c, d: {"cmd": c}),
    ("run_shell_command", ("command",), lambda c, d: {"command": c, "description": d}),
    ("bash", ("command",), lambda c, d: {"command": c, "description": d}),
    ("shell_command", ("command",), lambda c, d: {"command": c}),
    ("shell", ("command",), lambda c, d: {"command": ["bash", "-lc", c]}),
    ("run_terminal_cmd", ("command",), lambda c, d: {"command": c, "is_background": False}),
)
# (tool name, path argument, content argument, needs an absolute path); always given an absolute path
WRITE_TOOLS: tuple[tuple[str, str, str, bool], ...] = (
    ("Write", "file_path", "content", True),  # Claude Code: file_path must be absolute
    ("write_file", "file_path", "content", False),  # Gemini CLI
    ("write", "filePath", "content", False),  # OpenCode
    ("create", "path", "file_text", True),  # Copilot CLI 1.0.102: absolute path, the parent must exist
)
# Where CLIs name the workspace in their prompts (Claude Code "Primary working directory:", Codex
# <cwd>…</cwd>, Gemini "Workspace Directories:", OpenCode/others "Working directory:").
CWD_PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"Primary working directory: *(/[^\s`'\"]+)",
        r"<cwd>(/[^<\n]+)</cwd>",
        r"Workspace Director(?:y|ies):?\**\s*\n?\s*(?:-\s*)?(/[^\s`'\"]+)",
        r"(?i)current(?:ly)? working (?:in the )?director(?:y|ies)(?: is)?:?\s*`?(/[^\s`'\"]+)",
        r"(?i)\bworking directory:\s*`?(/[^\s`'\"]+)",
    )
)


def _names(items: Any) -> Iterator[tuple[str, Any]]:
    for item in items or ():
        if isinstance(item, str):
            yield item, None
        elif isinstance(item, list):  # abbreviated Gemini sample: [[name, ...]]
            yield from _names(item)
        elif isinstance(item, Mapping):
            if "functionDeclarations" in item or "function_declarations" in item:
                for decl in item.get("functionDeclarations") or item.get("function_declarations") or ():
                    if isinstance(decl, Mapping) and isinstance(decl.get("name"), str):
                        yield decl["name"], decl.get("parametersJsonSchema") or decl.get("parameters")
            elif isinstance(item.get("function"), Mapping):  # Chat Completions
                fn = item["function"]
                if isinstance(fn.get("name"), str):
                    yield fn["name"], fn.get("parameters")
            elif isinstance(item.get("name"), str):  # Anthropic / Responses
                yield item["name"], item.get("input_schema") or item.get("parameters")


def offered_tools(body: Mapping[str, Any]) -> dict[str, Any]:
    """Tool name -> argument schema (``None`` when the request gives none), in the request's order."""
    return dict(_names(body.get("tools")))


def count_tool_results(protocol: str, body: Mapping[str, Any]) -> int:
    """Number of tool results already in the conversation (the index of the script step to answer)."""
    n = 0
    if protocol == ANTHROPIC:
        for msg in body.get("messages") or ():
            content = msg.get("content") if isinstance(msg, Mapping) else None
            if isinstance(content, list):
                n += sum(1 for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result")
    elif protocol == RESPONSES:
        items = body.get("input")
        if isinstance(items, list):
            n = sum(1 for i in items if isinstance(i, Mapping) and str(i.get("type", "")).endswith("_call_output"))
    elif protocol == CHAT:
        n = sum(1 for m in body.get("messages") or () if isinstance(m, Mapping) and m.get("role") in ("tool", "function"))
    elif protocol == GEMINI:
        for content in body.get("contents") or ():
            for part in (content.get("parts") if isinstance(content, Mapping) else None) or ():
                if isinstance(part, Mapping) and ("functionResponse" in part or "function_response" in part):
                    n += 1
    return n


def strings(value: Any, limit: int = 400) -> Iterator[str]:
    """Every string inside a JSON value (depth-first, at most ``limit`` strings)."""
    stack = [value]
    seen = 0
    while stack and seen < limit:
        v = stack.pop()
        if isinstance(v, str):
            seen += 1
            yield v
        elif isinstance(v, Mapping):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))


def workspace_dir(body: Mapping[str, Any]) -> str | None:
    """The workspace directory the CLI's prompt names (see ``CWD_PATTERNS``), or ``None``."""
    parts = [body.get(k) for k in ("system", "instructions", "systemInstruction", "messages", "input", "contents")]
    for text in strings(parts):
        for pattern in CWD_PATTERNS:
            m = pattern.search(text)
            if m:
                return m.group(1).rstrip(".,;:)")
    return None


def _fits(schema: Any, needed: tuple[str, ...]) -> bool:
    """True when ``schema`` is unknown or declares every argument in ``needed``."""
    if not isinstance(schema, Mapping):
        return True
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return True
    return all(k in props for k in needed)


def shell_tool(offered: Mapping[str, Any]) -> tuple[str, Callable[[str, str], dict[str, Any]]] | None:
    """The first fitting shell tool: ``(name, builder)``, or ``None`` when the CLI offered none."""
    for name, needed, build in SHELL_TOOLS:
        if name in offered and _fits(offered[name], needed):
            return name, build
    return None


def write_command(path: str, content: str) -> str:
    """A POSIX shell command that writes ``content`` to ``path`` exactly (parents created, no trailing
    newline added): ``mkdir -p DIR && printf '%s' CONTENT > PATH``."""
    target = shlex.quote(path)
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    prefix = f"mkdir -p {shlex.quote(parent)} && " if parent else ""
    return f"{prefix}printf '%s' {shlex.quote(content)} > {target}"


def tool_call(step: Step, offered: Mapping[str, Any], cwd: str | None = None, turn: int = 0) -> ToolCall | None:
    """Map a ``shell``/``write`` step onto the tools the CLI ``offered``; ``None`` when none fits.
    ``{turn}`` in a shell command becomes ``turn`` (the tool results so far), so a looping script's calls all
    differ (CLIs stop a model that repeats a cycle of identical calls, e.g. Gemini CLI's loop detection)."""
    if step.kind == "write":
        target = os.path.join(cwd, step.path) if cwd else None
        if target is not None and not os.path.lexists(target) and os.path.isdir(os.path.dirname(target)):
            for name, path_key, content_key, _abs in WRITE_TOOLS:
                if name in offered and _fits(offered[name], (path_key, content_key)):
                    return ToolCall(name, {path_key: target, content_key: step.content})
        command, description = write_command(step.path, step.content), f"Write {step.path}"
    elif step.kind == "shell":
        command = step.command.replace("{turn}", str(turn))
        description = _describe(command)
    else:
        return None
    found = shell_tool(offered)
    if found is None:
        return None
    name, build = found
    return ToolCall(name, build(command, description))


def _describe(command: str) -> str:
    first = command.strip().splitlines()[0] if command.strip() else command
    return ("Run " + first)[:80]


SESSION_HEADERS = ("x-claude-code-session-id", "session-id", "x-session-id", "x-session-affinity", "x-codex-window-id")


def conversation_key(headers: Mapping[str, str], body: Mapping[str, Any]) -> str:
    """A key for one conversation (counts scripted errors with ``times``): the CLI's session header when it
    sends one, else a hash of the first user message."""
    low = {k.lower(): v for k, v in headers.items()}
    for h in SESSION_HEADERS:
        if low.get(h):
            return f"{h}:{low[h]}"
    first = ""
    for key in ("messages", "input", "contents"):
        for item in body.get(key) or () if isinstance(body.get(key), list) else ():
            if isinstance(item, Mapping) and item.get("role") in ("user", None):
                first = json.dumps(item, sort_keys=True)[:4000]
                break
        if first:
            break
    return "hash:" + hashlib.sha256(first.encode()).hexdigest()[:16]


def edit_format(body: Mapping[str, Any]) -> str | None:
    """Aider's edit format from its prompts: ``diff`` (SEARCH/REPLACE blocks), ``whole`` (file listings),
    ``ask`` (any other aider prompt, e.g. ``--chat-mode ask``: every aider system prompt starts "Act as an
    expert"), or ``None`` for a request that is not aider's."""
    text = "\n".join(s for s in strings(body.get("messages"), limit=200))
    if "<<<<<<< SEARCH" in text or "SEARCH/REPLACE" in text:
        return "diff"
    if "file listing" in text:
        return "whole"
    for msg in body.get("messages") or ():
        if isinstance(msg, Mapping) and msg.get("role") == "system" and str(msg.get("content", "")).startswith("Act as an expert"):
            return "ask"
    return None


def _file_in_chat(body: Mapping[str, Any], path: str) -> str | None:
    """The content aider showed for ``path`` (a ``path`` line then a fenced block in a user message)."""
    pattern = re.compile(rf"(?m)^{re.escape(path)}\n```[^\n]*\n(.*?)^```", re.DOTALL)
    for msg in body.get("messages") or ():
        if isinstance(msg, Mapping) and msg.get("role") == "user" and isinstance(msg.get("content"), str):
            m = pattern.search(msg["content"])
            if m:
                return m.group(1)
    return None


def aider_reply(steps: tuple[Step, ...], fmt: str, body: Mapping[str, Any], final_text: str | None) -> str:
    """One reply that makes aider apply every ``write`` step, in its edit format.

    ``whole``: a ``path`` line, then the whole new content in a fenced block (aider's "file listing").
    ``diff``: a SEARCH/REPLACE block per file, SEARCH holding the file's current content when aider showed
    it in the chat, else empty (aider then creates the file). Shell steps have no equivalent (aider runs no
    tools) and are left out. The reply starts with ``final_text``. ``ask`` (aider's read-only chat mode) gets
    the ``whole`` listing too: the scripted model tries to write anyway, and aider must not apply it.
    """
    parts = [final_text or "Editing the files."]
    for s in steps:
        if s.kind != "write":
            continue
        content = s.content if s.content.endswith("\n") or not s.content else s.content + "\n"
        if fmt == "diff":
            before = _file_in_chat(body, s.path) or ""
            parts.append(f"{s.path}\n```\n<<<<<<< SEARCH\n{before}=======\n{content}>>>>>>> REPLACE\n```")
        else:
            parts.append(f"{s.path}\n```\n{content}```")
    return "\n\n".join(parts) + "\n"


def is_aider_followup(body: Mapping[str, Any], reply: str) -> bool:
    """True when an assistant message of the request already holds ``reply`` (aider came back after applying
    it, e.g. to fix lint errors): the double then only gives the final text."""
    head = reply.strip()[:200]
    return bool(head) and any(
        isinstance(msg, Mapping) and msg.get("role") == "assistant" and head in str(msg.get("content") or "")
        for msg in body.get("messages") or ()
    )
