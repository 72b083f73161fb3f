"""The supervisor's presence record (pure): what it says while the supervisor beats, once its heartbeats
stop, after a clean end; what ``status --json`` gets; a record that is not one; and the node script that
keeps it on the head (the same one as the desired state's), run for real."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sparktui.config import load_config
from sparktui.domain.lifecycle import presence_file
from sparktui.domain.presence import (
    HEARTBEAT_EVERY,
    STALE_AFTER,
    LastDecision,
    LastIncident,
    SupervisorPresence,
)

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"
T0 = 1_800_000_000.0


def hhmm(at: float) -> str:
    return time.strftime("%H:%M", time.localtime(at))


def record(**changes: Any) -> SupervisorPresence:
    base = SupervisorPresence(
        "spark1", 4242, T0, T0 + 100,
        decision=LastDecision("restart", "crashed", "vLLM crashed after ready: restarting it", T0 + 60),
        incident=LastIncident("20261204-140200-000", "crashed", "spark1", T0 + 58, "restart", 23.4),
        boot_ids={"spark1": "a", "spark2": "b"})
    return replace(base, **changes)


def test_a_live_supervisor_says_who_its_last_decision_and_its_incident() -> None:
    presence = record()
    assert presence.live(T0 + 100 + HEARTBEAT_EVERY)
    assert presence.describe(T0 + 110) == (
        f"supervised by spark1 (pid 4242) · last: restart after crash {hhmm(T0 + 60)} · "
        "incident 20261204-140200-000 (crash on spark1), serving again after 23s")


def test_three_missed_heartbeats_are_not_seen_and_a_clean_end_says_ended() -> None:
    presence = record(decision=None, incident=None)
    silent = T0 + 100 + STALE_AFTER + 135
    assert not presence.live(silent)
    assert presence.describe(silent) == "supervisor on spark1 (pid 4242): not seen for 3m00s"
    ended = record(decision=None, incident=None, ended=T0 + 101)
    assert not ended.live(T0 + 102)
    assert ended.describe(T0 + 102) == f"supervisor on spark1 (pid 4242) ended {hhmm(T0 + 101)}"


def test_the_record_survives_its_json_and_junk_is_no_record() -> None:
    presence = record()
    assert SupervisorPresence.parse(presence.to_json()) == presence
    assert SupervisorPresence.parse("OK\n" + presence.to_json()) == presence   # the last line is the JSON
    pid_as_text = '{"host": "x", "pid": "4242", "started": 1, "heartbeat": 2}'
    for junk in ("", "{}", "not json", "[1, 2]", pid_as_text):
        assert SupervisorPresence.parse(junk) is None, junk
    # A partial decision or incident is left out, not a reason to lose the rest.
    partial = json.loads(presence.to_json()) | {"decision": {"action": "restart"}, "incident": {"id": ""}}
    parsed = SupervisorPresence.parse(json.dumps(partial))
    assert parsed is not None and parsed.decision is None and parsed.incident is None
    assert parsed.boot_ids == {"spark1": "a", "spark2": "b"}


def test_status_json_gets_the_record_with_what_it_means_now() -> None:
    report = record().report(T0 + 100 + STALE_AFTER + 1)
    assert report["live"] is False and report["silent_s"] == STALE_AFTER + 1
    assert report["host"] == "spark1" and report["pid"] == 4242 and report["ended"] is None
    assert report["decision"]["action"] == "restart" and report["decision"]["at"].startswith("20")
    assert report["incident"]["id"] == "20261204-140200-000" and report["incident"]["serving_again_s"] == 23.4
    assert report["text"].startswith("supervisor on spark1 (pid 4242): not seen for")
    json.dumps(report)   # JSON-ready


def test_the_head_script_writes_and_reads_the_record(tmp_path: Path) -> None:
    config = load_config(CONFIG)
    homes = {config.head.name: str(tmp_path)}
    presence = record()
    read = presence_file.read_argv(config, homes)
    assert subprocess.run([sys.executable, *read[1:]], capture_output=True, text=True,
                          check=True).stdout.strip() == "{}"   # never written: no supervisor
    wrote = subprocess.run([sys.executable, *presence_file.write_argv(config, homes, presence)[1:]],
                           capture_output=True, text=True, check=True)
    assert wrote.stdout.strip() == "OK"
    assert presence_file.presence_path(config, homes).endswith("/supervisor.json")
    out = subprocess.run([sys.executable, *read[1:]], capture_output=True, text=True, check=True).stdout
    assert SupervisorPresence.parse(out) == presence
