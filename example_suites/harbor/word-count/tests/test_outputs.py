"""Checks of /app/wordcount.py (copied to /tests and run by /tests/test.sh)."""

import subprocess
import sys

sys.path.insert(0, "/app")


def test_counts_case_insensitively():
    from wordcount import count_words

    assert count_words("The cat and the hat. THE END") == {"the": 3, "cat": 1, "and": 1, "hat": 1, "end": 1}


def test_apostrophes_and_empty():
    from wordcount import count_words

    assert count_words("don't stop, don't") == {"don't": 2, "stop": 1}
    assert count_words("") == {}


def test_command_line(tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("b a b c a b\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "/app/wordcount.py", str(text)], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["b 3", "a 2", "c 1"]
