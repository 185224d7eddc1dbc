"""What is test machinery (``run.cleantree`` keeps the source's version of it in the tree the checks run in): the
pattern set, the parts of shared configuration files (``pyproject.toml``, ``setup.cfg``) that belong to the test
and lint tools, and the modules that would shadow an importable one. Text and names only: no git, no file of the tree
read (``shadow_names`` reads the installed distributions' metadata).

A pattern is one of:

- a file name glob (``conftest.py``, ``*.pth``): that name at any depth; ``name/``: a folder of that name at any
  depth, with all it holds; a glob with an inner ``/`` (``tests/data/*.json``): the path from the tree's root;
- a **part** of a shared file, ``pyproject.toml [tool.<glob>]`` (the ``[tool.X...]`` tables whose ``X`` matches)
  or ``setup.cfg [<glob>]`` (the sections whose name matches), at any depth: the agent's file is kept with the
  source's part put back (``merge_config``, verdict ``merged``), the whole file reset when the part cannot be
  separated;
- ``SHADOWING`` (``<shadowing modules>``): a module the agent added where it shadows an importable top-level module
  (``shadowing``).

A task's checks add the files their commands run through (``command_machinery``): a check that is not a counted
test run (``make test``, ``npm test``, ``sh run_tests.sh``) is judged by its exit code, so the file that says what
it runs is machinery, or an agent could replace ``test:`` with ``true``.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping

SHADOWING = "<shadowing modules>"
PYPROJECT, SETUP_CFG = "pyproject.toml", "setup.cfg"
MERGE_MAX_BYTES = 1024 * 1024  # a larger setup.cfg / pyproject.toml is reset, not merged

DEFAULT_MACHINERY = (
    # pytest's configuration and what shadows the runner or the interpreter's start-up
    "conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini",
    "pyproject.toml [tool.pytest*]", "setup.cfg [tool:pytest]",
    "pytest.py", "py.py", "_pytest/", "pytest/", "sitecustomize.py", "usercustomize.py", "*.pth", SHADOWING,
    # package metadata that can register plugins; bytecode and caches
    "*.dist-info/", "*.egg-info/", "__pycache__/", "*.pyc", "*.pyo", ".pytest_cache/",
    # the lint tools' configuration: a lint check is judged by its exit code
    "ruff.toml", ".ruff.toml", "pyproject.toml [tool.ruff*]",
    ".flake8", "setup.cfg [flake8*]", "setup.cfg [pycodestyle]", "setup.cfg [pep8]", "pyproject.toml [tool.flake8*]",
    "mypy.ini", ".mypy.ini", "setup.cfg [mypy*]", "pyproject.toml [tool.mypy*]",
    "pylintrc", ".pylintrc", "pylintrc.toml", ".pylintrc.toml", "setup.cfg [pylint*]", "pyproject.toml [tool.pylint*]",
    ".isort.cfg", "setup.cfg [isort]", "setup.cfg [tool:isort]", "pyproject.toml [tool.isort*]",
    "pyproject.toml [tool.black*]", "pyrightconfig.json", "pyproject.toml [tool.pyright*]", ".pre-commit-config.yaml",
)
_PART = re.compile(r"(?P<file>\S+) \[(?P<part>[^\]]+)\]")

# the files a runner reads what to run from (the first word of a command -> patterns); a ``-f FILE`` of make (and
# ``--makefile``) is added as given
RUNNER_FILES: dict[str, tuple[str, ...]] = {
    "make": ("Makefile", "makefile", "GNUmakefile", "*.mk"), "gmake": ("Makefile", "makefile", "GNUmakefile", "*.mk"),
    "npm": ("package.json",), "yarn": ("package.json",), "pnpm": ("package.json",),
    "nox": ("noxfile.py",), "tox": ("tox.ini",), "just": ("justfile", "Justfile", ".justfile"),
    "task": ("Taskfile.yml", "Taskfile.yaml"), "invoke": ("tasks.py",), "inv": ("tasks.py",),
}
_SHELLS = ("sh", "bash", "dash", "zsh")
_PYTHONS = re.compile(r"python(\d+(\.\d+)?)?")
_SEPARATORS = {";", "&&", "||", "|", "&"}


def command_machinery(commands: Iterable[str | None]) -> tuple[str, ...]:
    """The patterns of the files ``commands`` (shell command lines) run through: a runner's file (``RUNNER_FILES``:
    ``make`` -> ``Makefile``, ``npm`` -> ``package.json``, ...), and a script a command starts by its path inside the
    tree (``./run_tests.sh``, ``sh ci/check.sh``, ``python check.py``). A path leaving the tree (absolute, ``..``) and
    a command that cannot be split (``shlex``) add nothing."""
    found: list[str] = []
    for command in commands:
        if not command:
            continue
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            continue
        simple: list[list[str]] = [[]]
        for w in words:
            if w in _SEPARATORS:
                simple.append([])
            else:
                simple[-1].append(w)
        for argv in simple:
            while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):  # VAR=value before the command
                argv = argv[1:]
            if argv:
                found += _runs_through(argv)
    return tuple(dict.fromkeys(p for p in found if pattern_problem(p) is None))


def _runs_through(argv: list[str]) -> list[str]:
    """``command_machinery``'s files of one simple command ``argv``."""
    name = argv[0].rsplit("/", 1)[-1]
    if name in RUNNER_FILES:
        given = [argv[i + 1] for i, w in enumerate(argv[:-1]) if name in ("make", "gmake") and w in ("-f", "--file", "--makefile")]
        return [*RUNNER_FILES[name], *(_inside(g) for g in given)]
    if name in _SHELLS or _PYTHONS.fullmatch(name):
        script = next((w for w in argv[1:] if not w.startswith("-")), None)
        if script is None or (argv[1:] and argv[1] in ("-c", "-m")):
            return []
        return [_inside(script)]
    if "/" in argv[0]:  # ./run_tests.sh, scripts/check
        return [_inside(argv[0])]
    return []


def _inside(path: str) -> str:
    """``path`` as a pattern from the tree's root (``./`` dropped; a name alone: at any depth); an absolute or
    escaping path is no pattern (``pattern_problem`` drops it)."""
    return path[2:] if path.startswith("./") else path


def machinery_patterns(extra: Iterable[str] = (), replace: Iterable[str] | None = None) -> tuple[str, ...]:
    """The machinery set: ``DEFAULT_MACHINERY`` plus ``extra``, or ``replace`` alone when given."""
    base = tuple(replace) if replace is not None else DEFAULT_MACHINERY
    return tuple(dict.fromkeys((*base, *extra)))


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a machinery pattern (a sentence), or None when it can."""
    if not pattern.strip() or pattern.startswith("/") or ".." in pattern.split("/"):
        return "is no pattern inside the tree"
    if pattern.startswith("<") and pattern != SHADOWING:
        return f"is no rule (the one rule is {SHADOWING!r})"
    part = _PART.fullmatch(pattern)
    if part is None:
        return None
    if part["file"] == PYPROJECT:
        return None if re.fullmatch(r"tool\.[^.]+", part["part"]) else "names no [tool.<name>] table"
    return None if part["file"] == SETUP_CFG else f"names a part of {part['file']}, not of {PYPROJECT} or {SETUP_CFG}"


def _is_rule(pattern: str) -> bool:
    return pattern == SHADOWING or _PART.fullmatch(pattern) is not None


def is_machinery(rel: str, patterns: Iterable[str]) -> bool:
    """Whether the tree path ``rel`` (POSIX) matches a file pattern (parts and ``SHADOWING`` are applied by
    ``run.cleantree.build``): ``name`` (a glob) matches the file name at any depth, ``name/`` a folder name at any
    depth (all below it), ``a/b*`` (with an inner ``/``) the whole path."""
    parts = rel.split("/")
    for pat in patterns:
        if _is_rule(pat):
            continue
        if pat.endswith("/"):
            if any(fnmatch.fnmatchcase(d, pat[:-1]) for d in parts[:-1]):
                return True
        elif "/" in pat:
            if fnmatch.fnmatchcase(rel, pat.lstrip("/")) or (pat.startswith("**/") and fnmatch.fnmatchcase(rel, pat[3:])):
                return True
        elif fnmatch.fnmatchcase(parts[-1], pat):
            return True
    return False


def config_parts(name: str, patterns: Iterable[str]) -> tuple[str, ...]:
    """The globs of the machinery parts of a shared file named ``name`` (``pyproject.toml``: the ``X`` of each
    ``[tool.X]``; ``setup.cfg``: the section globs); empty for another file or when the set names none."""
    found = (_PART.fullmatch(p) for p in patterns)
    return tuple(m["part"].removeprefix("tool.") if name == PYPROJECT else m["part"]
                 for m in found if m is not None and m["file"] == name)


def merge_config(name: str, mine: bytes, base: bytes, globs: tuple[str, ...]) -> bytes | None:
    """The agent's ``setup.cfg`` / ``pyproject.toml`` (``mine``) with the base's machinery parts (``globs``, from
    ``config_parts``) put back: ``mine`` itself when its parts equal the base's (``base`` empty: the source had no
    such file), the merged bytes, or None when the file must be reset whole: over ``MERGE_MAX_BYTES``, not UTF-8,
    unreadable, nested past the interpreter's recursion limit, or when the merged file read back (pytest's own ini
    parser ``iniconfig``, ``tomllib``) does not hold exactly the base's parts and the agent's rest (a dotted ``ruff.x``
    key under ``[tool]``, an inline table)."""
    if len(mine) > MERGE_MAX_BYTES or len(base) > MERGE_MAX_BYTES:
        return None
    try:
        mine_text, base_text = mine.decode("utf-8"), base.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        return _merged(name, mine, mine_text, base_text, globs)
    except RecursionError:  # tables or arrays nested past the interpreter's limit (tomllib recurses): reset whole
        return None


def _merged(name: str, mine: bytes, mine_text: str, base_text: str, globs: tuple[str, ...]) -> bytes | None:
    cfg = name == SETUP_CFG
    part = functools.partial(_cfg_part if cfg else _toml_part, globs=globs)
    try:
        mine_part, mine_rest = part(mine_text)
        base_part, _ = part(base_text)
    except ValueError:
        return None
    if mine_part == base_part:
        return mine
    header, wanted = (_cfg_header, _matcher(globs, 0)) if cfg else (_toml_header, _matcher(globs, 1))
    keep, _ = _sections(mine_text.splitlines(keepends=True), header, wanted)
    _, theirs = _sections(base_text.splitlines(keepends=True), header, wanted)
    merged = _joined(keep, theirs)
    try:
        if part(merged) != (base_part, mine_rest):
            return None
    except ValueError:
        return None
    return merged.encode("utf-8")


def _matcher(globs: tuple[str, ...], depth: int) -> Callable[[object], bool]:
    """Whether a header (a section name; a TOML key path, ``depth`` 1: ``tool.<match>``) is a machinery part."""
    def wanted(header) -> bool:
        if depth == 0:
            return any(fnmatch.fnmatchcase(header, g) for g in globs)
        return len(header) >= 2 and header[0] == "tool" and any(fnmatch.fnmatchcase(header[1], g) for g in globs)
    return wanted


def _cfg_part(text: str, globs: tuple[str, ...]) -> tuple[object, object]:
    """``(the machinery sections, the other sections)`` as pytest's ini parser (``iniconfig``) reads them;
    ``ValueError`` when it cannot."""
    import iniconfig

    try:
        ini = iniconfig.IniConfig(SETUP_CFG, data=text)
    except iniconfig.ParseError as exc:
        raise ValueError(str(exc)) from exc
    wanted = _matcher(globs, 0)
    sections = [(s.name, dict(s.items())) for s in ini]
    return ({n: v for n, v in sections if wanted(n)}, {n: v for n, v in sections if not wanted(n)})


def _toml_part(text: str, globs: tuple[str, ...]) -> tuple[object, object]:
    """``(the [tool.X] tables whose X matches, everything else)`` as ``tomllib`` reads them; ``ValueError`` when it
    cannot."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from exc
    tool = data.get("tool")
    if not isinstance(tool, dict):
        return {}, data
    wanted = _matcher(globs, 1)
    ours = {k: v for k, v in tool.items() if wanted(("tool", k))}
    rest = {**data, "tool": {k: v for k, v in tool.items() if k not in ours}}
    if not rest["tool"]:
        del rest["tool"]
    return ours, rest


def _sections(lines: list[str], is_header, wanted) -> tuple[list[str], list[str]]:
    """Split ``lines`` into (lines outside the wanted sections, lines of the wanted sections)."""
    keep, taken, inside = [], [], False
    for line in lines:
        header = is_header(line)
        if header is not None:
            inside = wanted(header)
        (taken if inside else keep).append(line)
    return keep, taken


def _cfg_header(line: str) -> str | None:
    stripped = line.strip()
    if line[:1] == "[" and stripped.endswith("]"):
        return stripped[1:-1].strip()
    return None


def _joined(keep: list[str], theirs: list[str]) -> str:
    """The agent's lines ``keep``, then the base's parts ``theirs`` after one blank line."""
    text = "".join(keep)
    if theirs and text:
        text = text.rstrip("\n") + "\n\n"
    return text + "".join(theirs)


def _toml_header(line: str) -> tuple[str, ...] | None:
    stripped = line.strip()
    if not stripped.startswith("["):
        return None
    inner = stripped.lstrip("[")
    try:  # the header alone, read by tomllib: its key path, quoted keys and all
        data = tomllib.loads(f"[{inner.split(']', 1)[0]}]" if not stripped.startswith("[[") else stripped)
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while isinstance(data, (dict, list)) and data:
        if isinstance(data, list):
            data = data[0]
            continue
        key = next(iter(data))
        path.append(key)
        data = data[key]
    return tuple(path)


@functools.cache
def shadow_names() -> frozenset[str]:
    """The top-level module names an added module must not take (``shadowing``), of the harness's interpreter:
    ``stdlib_names`` and the top-level import names of the installed distributions
    (``importlib.metadata.packages_distributions``; about 0.2 s for 150 distributions, once per process) and of the
    modules in its site-packages folders. A check run by another interpreter (a task's own venv) may import other
    names."""
    import importlib.metadata
    import sysconfig

    folders = {sysconfig.get_path(key) for key in ("purelib", "platlib")}
    return frozenset({*stdlib_names(), *importlib.metadata.packages_distributions(),
                      *(name for folder in folders for name in _folder_modules(folder))})


@functools.cache
def stdlib_names() -> frozenset[str]:
    """The standard library's and built-in top-level module names: ``sys.stdlib_module_names``,
    ``sys.builtin_module_names`` and every module in the interpreter's own library folders (``stdlib``,
    ``platstdlib``, ``lib-dynload``), also the names that are no identifier but ``__import__`` takes, such as
    ``_sysconfigdata__linux_x86_64-linux-gnu`` (``sysconfig`` imports it by that name); but not ``test``, CPython's
    own test suite (which nothing imports at run time), a name projects give their tests."""
    import sysconfig

    folders = {sysconfig.get_path(key) for key in ("stdlib", "platstdlib")}
    folders |= {f"{folder}/lib-dynload" for folder in folders}
    found = {name for folder in folders for name in _folder_modules(folder)} - {"test"}
    return frozenset({*sys.stdlib_module_names, *sys.builtin_module_names, *found})


def _folder_modules(folder: str) -> set[str]:
    """The top-level modules a folder on ``sys.path`` gives: its module files (``module_name``) and its packages
    (folders with an ``__init__.py``); an unreadable or missing folder gives none."""
    import os

    names: set[str] = set()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir():
                    if "." not in entry.name and os.path.exists(os.path.join(entry.path, "__init__.py")):
                        names.add(entry.name)
                elif (name := module_name(entry.name)) is not None and name != "__init__":
                    names.add(name)
    except OSError:
        pass
    return names


def module_name(entry: str) -> str | None:
    """The top-level module a file named ``entry`` is when its folder is on ``sys.path`` (``NAME.py``,
    ``NAME.pyc``, an extension ``NAME.so`` / ``NAME.<tag>.so`` / ``NAME.pyd``), or None. ``NAME`` need not be an
    identifier: ``__import__`` and ``importlib`` take any name without a dot (``a-b`` finds ``a-b.py``)."""
    if entry.endswith((".py", ".pyc")):
        stem = entry.rsplit(".", 1)[0]
    elif entry.endswith((".so", ".pyd")):
        stem = entry.split(".", 1)[0]
    else:
        return None
    return stem if stem and "." not in stem else None


def shadowing(path: str, names: frozenset[str], listing: Callable[[str], Mapping[str, bool]],
              inits: Callable[[str], frozenset[str]]) -> bool:
    """Whether ``path`` (a file the agent added or changed, POSIX) is a module file (``module_name``) that is, or
    lies in, a top-level module ``NAME`` in ``names`` (``shadow_names``) sitting directly in a folder that can be on
    ``sys.path``: the tree's root, or a folder without an ``__init__.py`` in the tree the checks see (pytest's
    default ``prepend`` import mode inserts such folders, and src layouts add them). ``listing(folder)``: the base
    tree's ``{entry: is a folder}``; ``inits(folder)``: the ``__init__.*`` files of a folder in the tree the checks
    see. Not shadowing:

    - a module the source had there, in a folder that could be on ``sys.path`` in the source too (the project's
      own ``types.py``; a module of a package the agent unmade, its ``__init__.py`` removed, is shadowing);
    - a module inside a package (a folder with ``__init__.py``): imported as ``pkg.NAME``;
    - a file below a ``NAME/`` folder without an ``__init__`` (a namespace portion) when ``NAME`` is the standard
      library's or a built-in one (none is a namespace package: a regular module later on ``sys.path`` wins), or
      when the source had that folder; an ``__init__`` the agent puts in it makes it a package of the agent's."""
    parts = path.split("/")
    if module_name(parts[-1]) is None:
        return False  # data, not code
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        name = module_name(part) if last else part if part and "." not in part else None
        if name is None or name not in names:
            continue
        folder = "/".join(parts[:i])
        if i and "__init__.py" in inits(folder):
            continue  # package-internal
        base = listing(folder)
        if i and base.get("__init__.py") is False:
            return True  # the source's package, which the agent unmade
        if last:
            if not any(not is_dir and module_name(entry) == name for entry, is_dir in base.items()):
                return True
            continue
        inside = "/".join(parts[:i + 1])
        if any(module_name(entry) == "__init__" for entry in inits(inside)):  # a regular package
            if not any(not is_dir and module_name(entry) == "__init__" for entry, is_dir in listing(inside).items()):
                return True  # not the source's package
        elif base.get(part) is not True and name not in stdlib_names():
            return True  # a namespace portion of an installed distribution's name
    return False
