"""An ``--agentrace`` session moves what lives at ``pytest_configure`` out of the cycle collector's way
(``gc.freeze``, once per process) so that pytest's collections at its end look only at what the session made: what
a test leaves in a reference cycle is still collected, and an exception its ``__del__`` raises is still reported."""

from __future__ import annotations

import pytest
from helpers import make_repo

LEAKY = """\
import gc

class Loop:
    def __init__(self):
        self.me = self

    def __del__(self):
        raise RuntimeError("raised in __del__ of a cycle")


def test_leaves_a_cycle():
    Loop()
    assert gc.get_freeze_count() > 0  # the agentrace session froze what lived at configure
"""


def test_a_cycle_a_test_leaves_is_collected_and_its_unraisable_exception_reported(pytester: pytest.Pytester) -> None:
    make_repo(pytester.path / "repo", {"a.py": "A = 1\n"})
    (pytester.path / "task.yaml").write_text("name: gc\ndescription: nothing\nrepo: repo\ntest_command: 'true'\n"
                                             "agents: [{name: noop, expect: pass}]\ntimeout: 60\n")
    pytester.makepyfile(test_leaky=LEAKY)
    res = pytester.runpytest_subprocess("--agentrace", "task.yaml", "test_leaky.py", "-p", "no:cacheprovider",
                                        f"--agentrace-out={pytester.path / 'out'}")
    res.assert_outcomes(passed=2)
    out = res.stdout.str() + res.stderr.str()  # pytest warns of it after its summary, on stderr
    assert "PytestUnraisableExceptionWarning" in out and "raised in __del__ of a cycle" in out, out
