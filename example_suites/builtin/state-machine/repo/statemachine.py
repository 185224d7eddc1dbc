"""A finite state machine with guards, actions and enter/exit callbacks."""

from dataclasses import dataclass, field


class InvalidTransition(Exception):
    """The event cannot be handled in the current state."""


@dataclass(frozen=True)
class Transition:
    """What the callbacks receive: the transition being taken and the data passed to fire()."""

    source: str
    event: str
    target: str
    data: dict = field(default_factory=dict)


class StateMachine:
    def add_state(self, name, on_enter=None, on_exit=None, final=False):
        raise NotImplementedError

    def add_transition(self, source, event, target, guard=None, action=None):
        raise NotImplementedError

    def start(self, state):
        raise NotImplementedError

    def fire(self, event, **data):
        raise NotImplementedError
