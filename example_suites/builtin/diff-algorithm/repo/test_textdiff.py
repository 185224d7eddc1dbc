from textdiff import diff, unified_diff


def test_diff():
    assert diff(["a", "b", "c"], ["a", "c"]) == [("=", "a"), ("-", "b"), ("=", "c")]


def test_identical():
    assert unified_diff(["x"], ["x"]) == ""


def test_unified():
    assert unified_diff(["x", "y"], ["x", "z"]) == "--- a\n+++ b\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n"
