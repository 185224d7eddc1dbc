#!/bin/bash
# The reference solution: run by Harbor's oracle agent (and pytest-agentrace's) from /app.
set -euo pipefail
cat > /app/wordcount.py <<'PY'
"""Count words: runs of letters, digits or apostrophes, case-insensitive."""

import re
import sys
from collections import Counter

WORD = re.compile(r"[\w']+")


def count_words(text: str) -> dict[str, int]:
    return dict(Counter(w.lower() for w in WORD.findall(text) if w.strip("_")))


def main(path: str) -> None:
    with open(path, encoding="utf-8") as fh:
        counts = count_words(fh.read())
    for word, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(word, n)


if __name__ == "__main__":
    main(sys.argv[1])
PY
