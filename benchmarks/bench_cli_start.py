"""What a headless verb costs to start: CPU seconds of a fresh Python that parses ``--help``, next to the
eager way (every verb's module loaded up front, as the parser did before, and the dashboard's import).

CPU is the children's user+system time from ``getrusage`` (so the machine's load hardly moves it), the
median of ``--runs`` runs each:

    .venv/bin/python benchmarks/bench_cli_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sparktui.cli import VERBS  # noqa: E402  (the parser module alone: no verb is loaded)

HELP = "from sparktui.cli import main; import sys; sys.exit(main(sys.argv[1:]))"
CASES: dict[str, list[str]] = {
    "bare python": ["-c", "pass"],
    "sparktui --help": ["-c", HELP, "--help"],
    # Every verb's own --help: its module alone, without the config (pydantic) or the dashboard.
    **{f"sparktui {verb} --help": ["-c", HELP, verb, "--help"] for verb in VERBS},
    # The eager way: every verb's options (and so its module, the config and pydantic) loaded to parse.
    "eager: every verb loaded": [
        "-c", "from sparktui.cli import build_parser; build_parser(load_verbs=True)"],
    "eager: import sparktui.ui.app": ["-c", "import sparktui.ui.app"],
}


def cpu_of(args: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    for args in CASES.values():
        cpu_of(args)   # warm the file cache and the bytecode
    figures = {name: statistics.median(cpu_of(args) for _ in range(runs)) for name, args in CASES.items()}
    width = max(map(len, figures))
    for name, cpu in figures.items():
        print(f"{name:<{width}}  {cpu * 1000:7.0f} ms CPU")
    lazy = figures["sparktui --help"]
    verbs = {name: cpu for name, cpu in figures.items()
             if name.startswith("sparktui ") and name != "sparktui --help"}
    slowest = max(verbs, key=verbs.__getitem__)
    print(f"slowest verb --help: {slowest} ({verbs[slowest] * 1000:.0f} ms CPU)")
    print(f"--help vs eager (every verb loaded): {figures['eager: every verb loaded'] / lazy:.1f}× less CPU; "
          f"vs importing the dashboard: {figures['eager: import sparktui.ui.app'] / lazy:.1f}×")


if __name__ == "__main__":
    main()
