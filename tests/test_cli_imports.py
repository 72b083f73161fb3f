"""Headless verbs start fast: what ``sparktui.cli`` imports to parse a verb's ``--help``, in a fresh Python.

Each case runs in a subprocess (this test process has Textual loaded long since) and reads ``sys.modules``
after the parser has printed the help and exited.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from sparktui.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""

#: Never for a verb's --help: the dashboard, the SSH library, the config's validation library.
HEAVY = ("textual", "rich", "asyncssh", "pydantic", "httpx",
         "sparktui.ui", "sparktui.remote", "sparktui.config")


def modules_after(*argv: str, usage: bool = True) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert not usage or "usage: sparktui" in done.stdout, done.stdout + done.stderr
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def loaded(modules: set[str], package: str) -> bool:
    return any(m == package or m.startswith(package + ".") for m in modules)


def _verbs() -> list[str]:
    from sparktui.cli import VERBS

    return list(VERBS)


@pytest.mark.parametrize("argv", [("--help",), *((verb, "--help") for verb in _verbs())],
                         ids=lambda argv: " ".join(argv))
def test_help_loads_no_dashboard_ssh_or_pydantic(argv: tuple[str, ...]) -> None:
    modules = modules_after(*argv)
    assert [p for p in HEAVY if loaded(modules, p)] == []


def test_only_the_verb_being_parsed_is_imported() -> None:
    modules = modules_after("timeline", "--help")
    assert "sparktui.commands.timeline" in modules
    assert not {"sparktui.commands.status", "sparktui.commands.start", "sparktui.commands.bench"} & modules


def test_every_verb_still_has_its_options() -> None:
    from sparktui.cli import VERBS, build_parser

    parser = build_parser(load_verbs=True)
    sub = next(a for a in parser._actions if a.dest == "verb")
    for verb in VERBS:
        help_text = sub.choices[verb].format_help()   # type: ignore[index]
        assert f"sparktui {verb}" in help_text
    args = build_parser().parse_args(["--config", "x.toml", "status", "--json"])
    assert args.verb == "status" and args.json and args.config == "x.toml"


def test_reading_a_log_loads_no_dashboard_or_ssh() -> None:
    log = Path(__file__).resolve().parents[1] / "sparktui/assets/recorded/logs"
    first = sorted(log.glob("*.txt"))[0]
    modules = modules_after("timeline", "--json", str(first), usage=False)
    assert "sparktui.domain.logs.timeline" in modules          # it did read the log
    heavy = ("textual", "rich", "asyncssh", "sparktui.ui", "sparktui.remote")
    assert [p for p in heavy if loaded(modules, p)] == []


def test_status_loads_no_dashboard(tmp_path: Path) -> None:
    """``status`` on a cluster whose nodes refuse the connection (loopback, port 1): it reports them as
    unreachable, and the dashboard's libraries never load."""
    config = tmp_path / "config.toml"
    config.write_text('[[nodes]]\nname = "a"\nhost = "127.0.0.1"\nport = 1\nrole = "head"\n\n'
                      '[[nodes]]\nname = "b"\nhost = "127.0.0.1"\nport = 1\n\n'
                      '[engine]\nmodel = "/models/m"\n')
    modules = modules_after("--config", str(config), "status", "--json", "--timeout", "5", usage=False)
    assert "sparktui.commands.status" in modules               # it did ask the nodes
    heavy = ("textual", "rich", "sparktui.ui")
    assert [p for p in heavy if loaded(modules, p)] == []
