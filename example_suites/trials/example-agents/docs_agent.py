#!/usr/bin/env python3
"""An offline agent: answers only from the Markdown files (*.md) that mention the question's words."""
import pathlib
import re
import sys

STOP = {"what", "which", "does", "the", "where", "with", "from", "this", "that", "into", "and", "its", "their"}
words = {w for w in re.findall(r"[a-z]{4,}", sys.argv[1].lower()) if w not in STOP}
hits = []
for path in sorted(pathlib.Path(".").rglob("*.md")):
    if ".git" in path.parts or not path.is_file():
        continue
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if any(w in line.lower() for w in words):
            hits.append(f"{path.as_posix()}: {line.strip()}")
print("\n".join(hits) if hits else "I could not find the answer.")
