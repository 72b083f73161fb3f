"""``python -m tests.testbed up [NAMES...]`` / ``down [ID ...|--all]`` / ``list``: the test bed by hand."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.testbed.bed import Testbed, TestbedError, teardown_all, testbed_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.testbed", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="build test hosts, write and print their config.toml")
    up.add_argument("names", nargs="*", default=["spark1", "spark2"])
    up.add_argument("--pace", type=float, metavar="SECONDS",
                    help="the stand-in engine's start-up replay length (default 60 s, a real pace)")
    down = sub.add_parser("down", help="tear test beds down (by id, or all under the root directory)")
    down.add_argument("ids", nargs="*")
    down.add_argument("--all", action="store_true", help="every bed under the root (also other runs' beds!)")
    down.add_argument("--stale", action="store_true", help="beds whose building process has exited")
    sub.add_parser("list", help="list the test beds under the root directory")
    args = parser.parse_args(argv)
    root = testbed_root()

    if args.cmd == "up":
        try:
            bed = Testbed(args.names)
            bed.owner_pid = 0  # outlives this command on purpose: only ``down ID`` / ``--all`` remove it
            bed.up()
            if args.pace is not None:
                bed.write_config(engine={"env": {"SPARKTUI_STANDIN_PACE": str(args.pace)}})
        except TestbedError as exc:
            print(f"testbed: {exc}", file=sys.stderr)
            return 1
        print(f"# test bed {bed.id}: {', '.join(f'{h.name}={h.ip}' for h in bed.hosts.values())}")
        print(f"# config: {bed.config_path}")
        print(f"# ssh:    {' '.join(bed.ssh_argv(bed.names[0]))}")
        print(f"# down:   python -m tests.testbed down {bed.id}")
        print(bed.config_path.read_text())
        return 0
    if args.cmd == "list":
        for manifest in sorted(root.glob("tb*/manifest.json")):
            bed = Testbed.from_manifest(manifest)
            stale = bed.owner_pid and not Path(f"/proc/{bed.owner_pid}").exists()
            print(bed.id, bed.subnet, " ".join(f"{h.name}={h.ip}" for h in bed.hosts.values()),
                  f"owner={bed.owner_pid or 'manual'}" + (" (stale)" if stale else ""))
        return 0
    if args.all or args.stale:
        problems = teardown_all(root, stale_only=args.stale and not args.all)
    else:
        if not args.ids:
            parser.error("down needs test bed ids, --stale or --all")
        problems = []
        for run_id in args.ids:
            manifest = root / run_id / "manifest.json"
            if not manifest.exists():
                problems.append(f"{run_id}: no manifest at {manifest}")
                continue
            problems += Testbed.from_manifest(manifest).teardown()
    for problem in problems:
        print(f"testbed: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
