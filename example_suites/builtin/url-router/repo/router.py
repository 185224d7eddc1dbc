"""Route HTTP requests to handlers by method and path pattern."""

from dataclasses import dataclass


class NotFound(Exception):
    """No route matches the path."""


class MethodNotAllowed(Exception):
    """Routes match the path, but none for the method; ``allowed`` lists the methods that would."""

    def __init__(self, method, path, allowed):
        super().__init__(f"{method} not allowed for {path}; allowed: {', '.join(allowed)}")
        self.allowed = allowed


@dataclass(frozen=True)
class Match:
    handler: object
    params: dict
    name: str | None = None


class Router:
    def add(self, method, pattern, handler, name=None):
        raise NotImplementedError

    def match(self, method, path):
        raise NotImplementedError

    def url_for(self, name, **params):
        raise NotImplementedError
