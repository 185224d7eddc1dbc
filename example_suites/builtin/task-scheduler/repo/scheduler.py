"""Run tasks with dependencies on a pool of threads."""


class CycleError(Exception):
    """The dependencies form a cycle; ``cycle`` lists it."""

    def __init__(self, cycle):
        super().__init__("dependency cycle: " + " -> ".join(cycle))
        self.cycle = cycle


class TaskFailed(Exception):
    """Some tasks raised; see ``results``, ``errors`` and ``skipped``."""

    def __init__(self, results, errors, skipped):
        super().__init__(f"{len(errors)} task(s) failed: {', '.join(sorted(errors))}")
        self.results = results
        self.errors = errors
        self.skipped = skipped


class Scheduler:
    def __init__(self, max_workers=4):
        raise NotImplementedError

    def add(self, name, func, deps=()):
        raise NotImplementedError

    def order(self):
        raise NotImplementedError

    def run(self):
        raise NotImplementedError
