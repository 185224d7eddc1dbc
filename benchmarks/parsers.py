"""Parser throughput of the agent adapters on recorded output. Prints figures; asserts nothing.

Usage: python benchmarks/parsers.py [--mb 20]

For each adapter, its largest sample in tests/samples is repeated (JSON-line events duplicated, so the stream
stays well formed for the parser) up to about ``--mb`` megabytes, then parsed once; prints MB/s and the
parse time of a run's worst realistic output size (the 8 MB head of a captured stream, process.DEFAULT_HEAD).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pytest_agentrace.agents import get_adapter
from pytest_agentrace.cli.parse import CLI_AGENTS

SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "samples"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=20.0, help="size of the synthetic stream per adapter (MB)")
    args = ap.parse_args()
    print(f"{'agent':10} {'sample':58} {'MB':>6} {'seconds':>8} {'MB/s':>7}")
    for agent in CLI_AGENTS:
        files = [p for p in (SAMPLES / agent).iterdir() if not p.name.endswith(".expected.json") and "otel" not in p.name and "analytics" not in p.name]
        sample = max(files, key=lambda p: p.stat().st_size)
        text = sample.read_text()
        lines = text.splitlines(keepends=True)
        body, last = lines[:-1] or lines, lines[-1:] if len(lines) > 1 else []
        reps = max(1, int(args.mb * 1e6 / max(1, len(text))))
        big = "".join(body * reps + last)
        adapter = get_adapter(agent)
        start = time.perf_counter()
        adapter.parse_output(big, "", {})
        seconds = time.perf_counter() - start
        mb = len(big.encode()) / 1e6
        print(f"{agent:10} {sample.name[:58]:58} {mb:6.1f} {seconds:8.3f} {mb / seconds:7.1f}")


if __name__ == "__main__":
    main()
