"""The red team's battery against the checks' clean tree as overlayfs layers (``run.cleanlayers``, mounted by the
check's box): a hostile agent leaves what the layer writer could mis-handle, and hostile graded code inside a check
goes after the layers (a template's base layer is shared by every run of the process). Each test is an attack and
its right outcome: the attack fails and the run is judged as its change deserves.

- What the agent leaves (names with a newline or a byte that is not UTF-8, names overlayfs or aufs might read as
  whiteouts or opaque markers, a path of 120 folders, setuid / setgid / sticky bits, a link loop, a hard link,
  ``user.overlay.*`` extended attributes on its files and folders) reaches the checks as git keeps it: the layers are
  written from git's blobs, so no mode bit beyond git's, no xattr and no shared inode gets there.
- Graded code in a check (``test_command``) writes, removes, chmods, sets ``user.overlay.opaque`` (overlayfs escapes
  it into the upper folder), tries a private mount namespace to remount the tree or mount over it, a whiteout of its
  own, and writes through the host paths ``/proc/self/mountinfo`` names for the layers: the next check of the run, the
  next run of the same template (the shared base layer) and a concurrent member of a race all see the pristine tree.
- A link the agent put where a verify file's folder was: the verify file is not written through it (``tampered``).
- A check filling the overlay's upper folder (many files under the largest-file limit, a sparse file, xattrs) meets
  the disk limit. A hole, fixed: one spending the host's inodes (empty files, hard links, short links: no data block)
  did not: 120,000 entries under a 16 MiB limit passed; every entry now counts a block (``run.limits.ENTRY_BYTES``).

The battery runs as root and, in ``.ci/run``, as an unprivileged user too (``scripts/run-as-user.sh``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_repo, write_script

from pytest_agentrace.run.sandbox import overlay_bwrap, probe

needs_overlay = pytest.mark.skipif(probe(True)[0] is None or overlay_bwrap() is None,
                                   reason="needs the box and a bwrap that mounts overlayfs without privilege")

REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
    "sub/s.txt": "s\n", "sub/deeper/d.txt": "d\n", "hidden/keep.txt": "k\n", "other/o.txt": "o\n",
}
DEEP = "deep" + "/dddddddddddddddddddddddddddddddd" * 120  # ~4 kB of path, just under PATH_MAX below /tmp

ODD_AGENT = f"""\
import os
open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n")
os.makedirs("odd", exist_ok=True)
open("odd/new\\nline.txt", "w").write("nl\\n")
open(b"odd/bad\\xff", "w").write("bad\\n")
open(".wh.calc.py", "w").write("wh\\n")          # aufs's whiteout name of a file that stays
open("odd/.wh.calc.py", "w").write("wh\\n")
open("sub/.wh..wh..opq", "w").write("opq\\n")    # aufs's opaque marker in a folder whose base files stay
open("setuid.sh", "w").write("x\\n"); os.chmod("setuid.sh", 0o755)
for path, mode in (("setuid.sh", 0o6755), ("sticky", 0o3777)):  # the box's seccomp filter refuses the two bits
    os.makedirs("sticky", exist_ok=True); open("sticky/f", "w").write("f\\n")
    try:
        os.chmod(path, mode)
    except PermissionError:
        os.chmod(path, mode & 0o1777)
os.makedirs({DEEP!r}); open({DEEP!r} + "/leaf.txt", "w").write("leaf\\n")
os.symlink("loop2", "loop1"); os.symlink("loop1", "loop2")
os.link("calc.py", "hard.py")
for path, name in (("sub", "user.overlay.opaque"), ("calc.py", "user.overlay.redirect"), ("other", "user.overlay.origin")):
    try:
        os.setxattr(path, name, b"y")
    except OSError:
        pass
try:
    os.mkfifo("fifo")  # git cannot keep it: a workspace with one is still judged (its snapshot leaves it out or fails)
    os.unlink("fifo")
except OSError:
    pass
"""
ODD_CHECK = f"""\
import os, sys
bad = []
def want(cond, what):
    if not cond:
        bad.append(what)
want(open("odd/new\\nline.txt").read() == "nl\\n", "newline name")
want(open(b"odd/bad\\xff").read() == "bad\\n", "non-UTF-8 name")
want(open(".wh.calc.py").read() == "wh\\n" and "a + b" in open("calc.py").read(), ".wh. name")
want(open("odd/.wh.calc.py").read() == "wh\\n", ".wh. name in a new folder")
want(open("sub/.wh..wh..opq").read() == "opq\\n" and open("sub/s.txt").read() == "s\\n"
     and open("sub/deeper/d.txt").read() == "d\\n", "opaque marker name")
want(os.stat("setuid.sh").st_mode & 0o7777 == 0o755, "setuid bits %o" % os.stat("setuid.sh").st_mode)
want(os.stat("sticky").st_mode & 0o7000 == 0 and open("sticky/f").read() == "f\\n", "sticky bit")
want(open({DEEP!r} + "/leaf.txt").read() == "leaf\\n", "deep path")
want(os.readlink("loop1") == "loop2" and os.readlink("loop2") == "loop1", "link loop")
want(os.stat("hard.py").st_nlink == 1 and os.stat("calc.py").st_nlink == 1, "hard link")
want(os.listxattr("sub") == [] and os.listxattr("calc.py") == [] and os.listxattr("other") == [], "xattrs")
want(open("other/o.txt").read() == "o\\n" and open("hidden/keep.txt").read() == "k\\n", "base files")
print("bad:", bad)
sys.exit(1 if bad else 0)
"""


def _task(tmp: Path, agents: str, test_command: str, extra: str = "") -> None:
    (tmp / "task.yaml").write_text(
        "name: t\ndescription: fix add\nrepo: repo\ntimeout: 120\n"
        f"test_command: {json.dumps(test_command)}\n{extra}agents:\n{agents}")


def _runs(tmp: Path) -> dict[str, dict]:
    return {str(p.parent.relative_to(tmp / "out/runs")): json.loads(p.read_text())
            for p in (tmp / "out/runs").rglob("run.json")}


@needs_overlay
def test_odd_entries_the_agent_leaves_reach_the_checks_as_git_keeps_them(pytester: pytest.Pytester,
                                                                        bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", {**REPO, "odd_check.py": ODD_CHECK})
    write_script(bin_dir / "odd", ODD_AGENT)
    _task(pytester.path, "  - {name: odd, command: [odd]}\n", "python odd_check.py && python -m pytest -q test_calc.py")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "--agentrace-sandbox=bwrap", "-p", "no:cacheprovider")
    (run,) = _runs(pytester.path).values()
    log = (pytester.path / "out/runs/t/default/odd/1/tests.log").read_text(errors="replace")
    assert run["extra"]["clean_tree"] == "overlay"
    assert run["status"] == "passed", (run["reason"], log)


VANDAL = r"""
import glob, os, subprocess, sys
pristine = (open("calc.py").read() == "def add(a, b):\n    return a + b\n" and open("sub/s.txt").read() == "s\n"
            and open("sub/deeper/d.txt").read() == "d\n" and not os.path.exists("planted")
            and os.stat("sub").st_mode & 0o777 == 0o755 and os.listxattr("sub") == [] and os.path.exists("other/o.txt"))
print("pristine:", pristine, flush=True)
if not pristine:
    sys.exit(3)
if sys.argv[1:] == ["vandal"]:
    open("planted", "w").write("x")
    open("sub/s.txt", "a").write("vandal\n")
    open("calc.py", "w").write("def add(a, b):\n    return 0\n")
    os.unlink("other/o.txt")
    for name in ("user.overlay.opaque", "user.overlay.redirect", "user.x", "trusted.overlay.opaque"):
        try:
            os.setxattr("sub", name, b"y")
        except OSError:
            pass
    os.makedirs("locked/a", exist_ok=True)
    os.chmod("sub", 0o700)
    # the layers' host paths, as mountinfo names them (not mounted in the box: nothing there)
    hosts = []
    for line in open("/proc/self/mountinfo"):
        if " - overlay " in line:
            for opt in line.split()[-1].split(","):
                key, _, val = opt.partition("=")
                if key in ("lowerdir", "upperdir", "workdir"):
                    hosts += [v.replace("/oldroot", "", 1) for v in val.split(":")]
    # and every folder named so in the box (another run's or race member's layers would be siblings of these)
    hosts += [os.path.dirname(h) for h in hosts] + glob.glob("/tmp/**/*.layers*", recursive=True)
    hosts += glob.glob("/tmp/**/agentrace-bases-*", recursive=True)
    for host in hosts:
        for target in (host, host + "/sub", "/proc/self/root" + host):
            try:
                with open(os.path.join(target, "planted"), "w") as fh:
                    fh.write("x")
                print("WROTE", target, flush=True)
            except OSError:
                pass
    for cmd in ("mount -o remount,rw . ; echo y > sub/s.txt ; echo y > planted2",
                "mount -t tmpfs none . && echo REMOUNTED",
                "mknod wo c 0 0 && mv wo calc.py"):
        subprocess.run(["unshare", "-rm", "sh", "-c", cmd], capture_output=True)
        subprocess.run(["sh", "-c", cmd], capture_output=True)
    # a process left behind, to write into the next check's tree once this one has ended
    subprocess.Popen(["sh", "-c", "sleep 2; echo late > planted; echo late >> sub/s.txt"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


@needs_overlay
def test_a_checks_vandalism_reaches_neither_the_next_check_nor_the_next_run(pytester: pytest.Pytester, bin_dir: Path,
                                                                           xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", {**REPO, "vandal.py": VANDAL})
    write_script(bin_dir / "fixer", 'open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n")\n')
    _task(pytester.path, "  - {name: fixer, command: [fixer]}\n",
          "python vandal.py vandal", 'lint_command: "python vandal.py vandal"\n'
          'verify_command: "sleep 3 && python vandal.py && test -f hidden/h.txt && python -m pytest -q test_calc.py"\nverify_files:\n  hidden/h.txt: secret\n')
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "--agentrace-sandbox=bwrap", "--agentrace-reps", "3", "-p", "no:cacheprovider", *xdist)
    runs = _runs(pytester.path)
    assert len(runs) == 3
    for name, run in runs.items():
        log = (pytester.path / "out/runs" / name / "tests.log").read_text(errors="replace")
        assert "WROTE" not in log, log
        assert run["extra"]["clean_tree"] == "overlay"
        assert {c: v["exit_code"] for c, v in run["checks"].items()} == {"tests": 0, "lint": 0, "verify": 0}, log
        assert run["status"] == "passed", (run["reason"], log)


@needs_overlay
def test_racing_members_checks_share_the_base_and_never_see_each_others_writes(pytester: pytest.Pytester,
                                                                              bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", {**REPO, "vandal.py": VANDAL})
    write_script(bin_dir / "fixer", 'open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n")\n')
    _task(pytester.path, "  - {name: one, command: [fixer]}\n  - {name: two, command: [fixer]}\n"
          "  - {name: three, command: [fixer]}\n",
          "python vandal.py vandal && sleep 2",
          'verify_command: "python vandal.py"\nverify_files:\n  hidden/h.txt: secret\n')
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "--agentrace-sandbox=bwrap", "--agentrace-race", "--agentrace-race-grace", "60",
                       "-p", "no:cacheprovider")
    runs = _runs(pytester.path)
    assert len(runs) == 3
    for name, run in runs.items():
        log = (pytester.path / "out/runs" / name / "tests.log").read_text(errors="replace")
        assert run["extra"]["clean_tree"] == "overlay"
        assert {c: v["exit_code"] for c, v in run["checks"].items()} == {"tests": 0, "verify": 0}, log


@needs_overlay
def test_a_link_where_the_verify_files_folder_was_is_not_written_through(pytester: pytest.Pytester,
                                                                        bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", REPO)
    write_script(bin_dir / "linker", """\
        import os, shutil
        open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n")
        shutil.rmtree("hidden")
        os.symlink("other", "hidden")  # inside the tree: the clean tree keeps it
        """)
    _task(pytester.path, "  - {name: linker, command: [linker]}\n", "python -m pytest -q test_calc.py",
          'verify_command: "cat hidden/h.txt"\nverify_files:\n  hidden/h.txt: secret\n')
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "--agentrace-sandbox=bwrap", "-p", "no:cacheprovider")
    (run,) = _runs(pytester.path).values()
    assert run["extra"]["clean_tree"] == "overlay"
    assert run["status"] == "failed" and run["reason"] == "tampered: hidden/h.txt", run["reason"]
    assert "verify" not in run["checks"]


FILLER = r"""
import os, time
os.makedirs("fill", exist_ok=True)
for i in range(12):  # each file under RLIMIT_FSIZE, the whole far over the disk limit, in the overlay's upper folder
    with open(f"fill/{i}", "wb") as fh:
        fh.write(os.urandom(3 * 2**20))
with open("sparse", "wb") as fh:  # a hole counts its size
    fh.truncate(7 * 2**20)
for name in os.listdir("fill"):
    try:
        os.setxattr("fill/" + name, "user.pad", b"x" * 3000)
    except OSError:
        pass
time.sleep(30)
"""


INODES = r"""
import os, time
os.makedirs("many", exist_ok=True)
os.chdir("many")
for i in range(40000):  # empty files, hard links, short links: no data block, an inode or an entry each
    open(f"e{i}", "w").close()
    os.link(f"e{i}", f"h{i}")
    os.symlink("x", f"s{i}")
time.sleep(30)
"""


@needs_overlay
@pytest.mark.parametrize(("script", "disk"), [(FILLER, "8M"), (INODES, "16M")], ids=["bytes", "inodes"])
def test_a_check_filling_the_overlays_upper_folder_meets_the_disk_limit(pytester: pytest.Pytester, bin_dir: Path,
                                                                        script: str, disk: str) -> None:
    """Bytes (large, sparse, xattrs) or the host's inodes (empty files, hard links, short links: no data block)."""
    make_repo(pytester.path / "repo", {**REPO, "filler.py": script})
    write_script(bin_dir / "fixer", 'open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n")\n')
    _task(pytester.path, "  - {name: fixer, command: [fixer]}\n", "python filler.py")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "--agentrace-sandbox=bwrap", "--agentrace-disk", disk, "-p", "no:cacheprovider")
    (run,) = _runs(pytester.path).values()
    assert run["extra"]["clean_tree"] == "overlay"
    assert run["status"] == "failed", run["reason"]
    assert run["reason"].startswith("resource limit: disk") and "tests check" in run["reason"], run["reason"]
