"""Line diffs: a minimal edit script and the unified diff format."""


def diff(a, b):
    """Return the edit script turning the list of lines ``a`` into ``b``."""
    raise NotImplementedError


def unified_diff(a, b, fromfile="a", tofile="b", context=3):
    """Return the unified diff of ``a`` and ``b`` as one string."""
    raise NotImplementedError
