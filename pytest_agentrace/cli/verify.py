"""``agentrace verify OUT [--quick] [--digest D]``: check a results folder's records against its sessions' manifests.

Exit status 0 when every ``run.json`` (and, without ``--quick``, every artifact beside it) matches the newest
manifest naming its folder and no record's status contradicts its evidence; 1 naming each record that was
changed, added or removed after its session; 2 when ``OUT`` is not a results folder. See ``record.manifest``.

With ``$AGENTRACE_MANIFEST_KEY`` set, the manifests' MACs, chains and seals are checked with it too (a re-hashed
line, a forged line of an added run, a removed run with its line). ``--digest D`` (the digest a session printed at
its end) checks the folder against it without a key.

The other commands that read a results folder call ``warn_unverifiable``: ``report``, ``snapshot``, ``plan``,
``export``, ``html`` and ``comment`` print a warning and go on; gates (``compare --fail-on``, ``regress``) refuse
to decide on unverifiable records.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_agentrace.record.manifest import Verification, manifest_key, results_digest, verify

SHOWN = 5  # unverifiable records named in a warning (``agentrace verify`` names them all)


def register(sub: Any) -> None:
    """Add the ``verify`` subcommand to the ``agentrace`` parser."""
    p = sub.add_parser("verify", help="check that no run record was changed, added or removed after its session",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("out", metavar="OUT", help="results folder (--agentrace-out)")
    p.add_argument("--quick", action="store_true", help="hash run.json only, not the logs and artifacts beside it")
    p.add_argument("--digest", metavar="D", default=None,
                   help="the results digest a session printed at its end: the folder must still match it")
    p.set_defaults(func=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    """Print what ``record.manifest.verify`` found; 0 all verified, 1 any problem, 2 no results folder."""
    out = Path(args.out)
    if not (out / "runs").is_dir():
        print(f"agentrace verify: {out}: no results folder (no runs/ inside)", file=sys.stderr)
        return 2
    key = manifest_key()
    found = verify(out, artifacts=not args.quick, key=key)
    for line in found.lines():
        print(line)
    digest_ok = True
    if args.digest is not None:
        now = results_digest(out)
        digest_ok = now == args.digest.strip().lower().removeprefix("sha256:")
        print(f"results digest {now}: " + ("matches" if digest_ok else f"does NOT match {args.digest} (entries of "
                                           "the manifests were changed, added or removed since)"))
    print(f"{found.verified} records verified, {len(found.problems)} unverifiable"
          + (f", {len(found.manifest_errors)} manifest problems" if found.manifest_errors else "")
          + (" (manifests checked with the key)" if key is not None else ""))
    return 0 if found.ok and digest_ok else 1


def warn_unverifiable(out: Path, runs: Iterable[str] | None = None, keep: bool = False) -> Verification:
    """Verify ``out`` (``run.json`` only) and print one warning, with the first few records, when any record is
    unverifiable. ``runs``: the record folders of a walk the caller has just made (``runfile.scan_runs``). ``keep``:
    the verification's ``records`` hold the outcome parsed from each manifested record's hashed bytes (for
    ``index.iter_outcomes``'s ``verified``: a report then reads those, not the index). Returns the verification."""
    found = verify(Path(out), artifacts=False, key=manifest_key(), runs=runs, keep=keep)
    if not found.ok:
        lines = found.lines()
        print(f"agentrace: warning: {len(lines)} unverifiable records in {out} (changed, added or removed "
              f"after their session; `agentrace verify {out}` names them all):", file=sys.stderr)
        for line in lines[:SHOWN]:
            print(f"  {line}", file=sys.stderr)
    return found


def refuse_gate(found: Verification, out: Path, used: list[str] | None = None) -> str | None:
    """The error a gate gives when a record it would decide on is unverifiable (None: it may decide). ``used``: the
    run folders (relative to ``out``) the gate reads; None: all of them."""
    bad = [w for w in found.problems if used is None or w in used] + list(found.manifest_errors)
    if not bad:
        return None
    return (f"refusing to gate on {len(bad)} unverifiable records in {out} ({bad[0]}, ...); run `agentrace verify "
            f"{out}`, and re-run or remove the records it names")
