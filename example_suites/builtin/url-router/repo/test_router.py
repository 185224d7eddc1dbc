import pytest

from router import NotFound, Router


def test_static_and_param():
    r = Router()
    r.add("GET", "/", "home")
    r.add("GET", "/users/{id:int}", "user")
    assert r.match("GET", "/").handler == "home"
    m = r.match("GET", "/users/42")
    assert (m.handler, m.params) == ("user", {"id": 42})


def test_not_found():
    r = Router()
    r.add("GET", "/a", "a")
    with pytest.raises(NotFound):
        r.match("GET", "/b")
