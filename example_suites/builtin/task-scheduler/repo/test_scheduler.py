from scheduler import Scheduler


def test_order():
    s = Scheduler()
    s.add("b", lambda inputs: 1, deps=["a"])
    s.add("a", lambda inputs: 2)
    assert s.order() == ["a", "b"]


def test_run_passes_results():
    s = Scheduler()
    s.add("x", lambda inputs: 20)
    s.add("y", lambda inputs: inputs["x"] + 1, deps=["x"])
    assert s.run() == {"x": 20, "y": 21}
