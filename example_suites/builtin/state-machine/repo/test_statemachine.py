import pytest

from statemachine import InvalidTransition, StateMachine


def door():
    m = StateMachine()
    for s in ("closed", "open"):
        m.add_state(s)
    m.add_transition("closed", "open", "open")
    m.add_transition("open", "close", "closed")
    m.start("closed")
    return m


def test_fire_changes_state():
    m = door()
    assert m.fire("open") == "open"
    assert m.state == "open"


def test_invalid_event():
    m = door()
    with pytest.raises(InvalidTransition):
        m.fire("close")
    assert m.state == "closed"
