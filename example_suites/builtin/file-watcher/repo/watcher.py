"""Watch a folder tree for created, modified and deleted files by polling."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """One change: ``kind`` is "created", "modified" or "deleted"; ``path`` is relative, with '/'."""

    kind: str
    path: str


class Watcher:
    def __init__(self, root, patterns=("*",), ignore=()):
        raise NotImplementedError

    def poll(self):
        raise NotImplementedError

    def watch(self, callback, interval=0.5, stop=None):
        raise NotImplementedError
