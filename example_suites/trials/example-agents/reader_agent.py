#!/usr/bin/env python3
"""An offline example agent that answers from the files it reads and reports its work as Claude Code's
stream-json (the trial parses it with ``kind = "claude"``): one Read tool call per file read, and tokens
that grow with the text read (about 4 characters per token), so arms that let it read less cost less.

Usage: reader_agent.py (--docs-first | --source-only) PROMPT
  --docs-first   read docs/*.md first and stop there when they answer; else read the source (*.py)
  --source-only  read the source (*.py) only
"""
import json
import pathlib
import re
import sys

STOP = {"what", "which", "does", "the", "where", "with", "from", "this", "that", "into", "and", "its", "their"}
mode, prompt = sys.argv[1], sys.argv[2]
words = {w for w in re.findall(r"[a-z]{4,}", prompt.lower()) if w not in STOP}
events, hits, chars = [], [], len(prompt)


def emit(event):
    events.append(event)
    print(json.dumps(event), flush=True)


def read_all(pattern):
    global chars
    found = []
    for path in sorted(pathlib.Path(".").rglob(pattern)):
        if ".git" in path.parts or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        chars += len(text)
        emit({"type": "assistant", "message": {"id": f"msg_{len(events)}", "role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{len(events)}", "name": "Read", "input": {"file_path": path.as_posix()}}]}})
        found += [f"{path.as_posix()}: {line.strip()}" for line in text.splitlines() if any(w in line.lower() for w in words)]
    return found


emit({"type": "system", "subtype": "init", "model": "example-reader", "tools": ["Read"]})
if mode == "--docs-first":
    hits = read_all("docs/*.md")
if not hits:
    hits = read_all("*.py")
answer = "\n".join(hits) if hits else "I could not find the answer."
emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": len(events), "result": answer,
      "usage": {"input_tokens": chars // 4, "output_tokens": len(answer) // 4 + 1,
                "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}})
