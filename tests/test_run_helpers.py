"""Which runs have a helper in front of the agent: the stages that wrap the agent's argv (the model double's
``AgentSession.apply``, ``run.agent.network_for``) say which helper they put there (``run.launch.Wrapped``), and
``run.agent.prepare`` puts the launcher in front only where none is (a helper starts the launcher itself). Each
combination of box, network mode and offline double is prepared and run: the agent starts, and the start channel
says so (a missing launcher in the box would read as a box that never started)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_agentrace import options as _options
from pytest_agentrace.agents import get_adapter
from pytest_agentrace.agents.base import RunContext
from pytest_agentrace.model_double.netns import probe as netns_probe
from pytest_agentrace.run import agent
from pytest_agentrace.run.launch import LAUNCHER, Wrapped, launched
from pytest_agentrace.run.runspec import RunOptions, RunSpec
from pytest_agentrace.run.sandbox import Sandbox
from pytest_agentrace.run.sandbox import probe as sandbox_probe
from pytest_agentrace.spec.common import AgentSpec

NETNS, BRIDGE = "pytest_agentrace.model_double.inside", "pytest_agentrace.run.netbridge"


def box_profile(offline: bool) -> Sandbox:
    exe, why = sandbox_probe(offline)
    if exe is None:
        pytest.skip(f"no sandbox here: {why}")
    package = Path(_options.__file__).resolve().parent
    sites = tuple(Path(p) for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages"))
    visible = (Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent, package, *sites)
    return Sandbox(exe, visible=visible, offline=offline)


def run_one(tmp_path: Path, boxed: bool, network: str, offline: bool) -> tuple[agent.Launch, agent.Finished]:
    if (offline or network != "host") and not boxed and netns_probe()[0] is None:
        pytest.skip(netns_probe()[1])
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "script.yaml"
    script.write_text("steps:\n  - text: DONE\n")
    options = RunOptions(sandbox=box_profile(offline) if boxed else None, offline=offline, network=network,
                         model_double=str(script) if offline else None)
    for name in ("ws", "run", "scratch/home"):
        (tmp_path / name).mkdir(parents=True)
    spec_agent = AgentSpec(name="echo", id="echo", command=("echo", "the agent ran"))
    spec = RunSpec("task", tmp_path / "task.yaml", "t", "default", spec_agent, 1, 60.0,
                   SimpleNamespace(network=None, limits=None), None)
    ctx = RunContext(workspace=tmp_path / "ws", run_dir=tmp_path / "run", home=tmp_path / "scratch/home",
                     prompt="hi", prompt_file=tmp_path / "run" / "prompt.txt", model=None, edits=True,
                     env={"PATH": "/usr/bin:/bin"}, timeout=60.0, agent=spec_agent, options=options)
    launch = agent.prepare(spec, ctx, get_adapter("plain"), [])
    return launch, agent.start(spec, ctx, launch)


# (box, network, offline) -> the helper in front of the agent, and the network mode
CASES = {
    (False, "host", False): (None, "host"),
    (False, "none", False): ("netns", "none"),  # unshare -n, with netns's helper in front
    (False, "provider", False): ("netbridge", "provider"),
    (False, "host", True): ("netns", "none"),  # --agentrace-offline: the namespace and its double
    (True, "host", False): (None, "host"),
    (True, "none", False): (None, "none"),  # bwrap --unshare-net: nothing in front
    (True, "provider", False): ("netbridge", "provider"),
    (True, "provider", True): ("netns", "none"),
}


@pytest.mark.parametrize(("boxed", "network", "offline"), list(CASES),
                         ids=[f"{'box' if b else 'no-box'}-{n}{'-offline' if o else ''}" for b, n, o in CASES])
def test_the_launcher_goes_where_no_helper_is(tmp_path: Path, boxed: bool, network: str, offline: bool) -> None:
    helper, mode = CASES[(boxed, network, offline)]
    launch, finished = run_one(tmp_path, boxed, network, offline)
    assert launch.net_mode == mode
    argv = " ".join(launch.run_argv)
    assert (NETNS in argv, BRIDGE in argv) == (helper == "netns", helper == "netbridge"), argv
    assert (LAUNCHER in launch.run_argv) == (helper is None)  # a helper puts it in front of the agent itself
    assert (finished.error, finished.code) == (None, 0), finished.stderr
    assert finished.stdout.strip() == "the agent ran"


def test_wrapped_says_whether_the_launcher_is_still_needed() -> None:
    assert Wrapped(["a"], {}).launchable() == launched(["a"])
    assert Wrapped(["helper", "--", "a"], {}, "netns").launchable() == ["helper", "--", "a"]


def test_offline_without_namespaces_has_no_helper_and_gets_the_launcher(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no namespace can be made, ``--agentrace-offline`` runs the agent as it is (the double in the harness,
    ``model-double.json`` saying why): nothing is in front of it, so the launcher is (it was left out)."""
    from pytest_agentrace.model_double import netns

    monkeypatch.setattr(netns, "probe", lambda: (None, "no namespaces here"))
    launch, finished = run_one(tmp_path, False, "host", True)
    assert launch.net_mode == "none" and not launch.session.offline
    assert LAUNCHER in launch.run_argv and NETNS not in " ".join(launch.run_argv)
    assert (finished.error, finished.code, finished.stdout.strip()) == (None, 0, "the agent ran")
    assert '"offline_unavailable": "no namespaces here"' in (tmp_path / "run" / "model-double.json").read_text()


def open_fds() -> list[str]:
    return sorted(f"{fd} {os.readlink(f'/proc/self/fd/{fd}')}" for fd in os.listdir("/proc/self/fd")
                  if os.path.exists(f"/proc/self/fd/{fd}"))


@pytest.mark.parametrize(("boxed", "network", "offline"), [(False, "host", False), (True, "provider", True)],
                         ids=["start-channel", "with-report-pipe"])
def test_an_interrupted_run_leaves_no_descriptor_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, boxed: bool,
                                                     network: str, offline: bool) -> None:
    """Ctrl-C while the agent runs (``process.run`` raises ``KeyboardInterrupt``): the start channel's ends (and the
    report pipe's) are closed all the same, as are the double and the network."""
    run_one(tmp_path / "warm", boxed, network, offline)  # the session's proxy and caches, opened once per process
    before = open_fds()

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(agent.process, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_one(tmp_path / "cut", boxed, network, offline)
    assert open_fds() == before
