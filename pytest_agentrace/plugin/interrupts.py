"""No agent outlives an interrupted session (SIGINT or SIGTERM; serial or pytest-xdist; sandbox on or off).

Every process of a session (the controller and each xdist worker) turns SIGTERM into ``KeyboardInterrupt``
(``run.resume.install_sigterm``), so the process running a run ends its agent's process group and sweeps escaped
descendants (``run.process``) before it stops. A signal sent to the controller alone does not reach the workers,
and pytest-xdist SIGKILLs a worker that does not finish within its exit timeout (which would orphan that worker's
agent): so on ``KeyboardInterrupt`` the controller passes SIGTERM on to the processes it started in its own session
(its workers; ``reaper.signal_helpers``). The controller is also a child subreaper (``reaper.Sweep``): a descendant
orphaned by a worker that died anyway is re-parented to it, and once an interrupted session has shut its workers
down, every process it started since its start is killed with its process group. A session started with SIGINT
ignored (``nohup ... &``) still stops on SIGTERM this way.
"""

from __future__ import annotations

import signal

import pytest

from pytest_agentrace.run import reaper


class Interrupts:
    """The controller's part (registered on the controller only, ``NAME``)."""

    NAME = "agentrace-interrupts"

    def __init__(self) -> None:
        self.sweep = reaper.Sweep()  # this process's children now (an in-process pytester's parent's are left alone)
        self.interrupted = False

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.interrupted = True
        reaper.signal_helpers(signal.SIGTERM, keep=self.sweep.before)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.interrupted:  # after pytest-xdist's teardown: whatever this session started and left behind
            self.sweep.kill_new()


def install(config: pytest.Config) -> None:
    """Register ``Interrupts`` on the controller (once)."""
    if not config.pluginmanager.has_plugin(Interrupts.NAME):
        config.pluginmanager.register(Interrupts(), Interrupts.NAME)
