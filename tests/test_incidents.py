"""The incident store: records round-trip through their JSON, times read back as ISO 8601, retention keeps
the newest within the bounds, and `sparktui incidents` lists and shows them (unknown id → exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

from sparktui.domain.incidents import EvidenceFile, Incident, IncidentStore, describe
from tests.cli_helpers import run_sparktui
from tests.json_times import bad_times


def incident(store: IncidentStore, n: int, text: str = "x") -> Incident:
    made = Incident(f"2026120{n}-120000-1", 1_796_000_000.0 + n, "crashed", "spark2", f"crash {n}")
    written = store.write_file(made, "vllm.log.tail", text)
    made = Incident(made.id, made.at, made.cause, made.node, made.detail,
                    files=(EvidenceFile(written.name, written.bytes, "the log"),))
    store.save(made)
    return made


def test_a_record_round_trips_and_is_updated(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path)
    made = incident(store, 1, "INFO line\n")
    assert store.all() == [made]
    assert bad_times(made.to_json()) == []
    updated = store.update(made.id, action="restart", serving_again_after=41.5)
    assert updated is not None and store.get(made.id) == updated
    assert store.read(updated, "vllm.log.tail") == "INFO line\n"
    assert "crashed on spark2 → restart, serving again after 42 s" in describe([updated])[0]
    assert store.update("nope", action="x") is None


def test_retention_keeps_the_newest_within_count_and_size(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path)
    for n in range(1, 6):
        incident(store, n, "y" * 1000)
    assert store.prune(keep_count=3) == ["20261201-120000-1", "20261202-120000-1"]
    assert [i.id for i in store.all()] == ["20261203-120000-1", "20261204-120000-1", "20261205-120000-1"]
    store.prune(keep_count=10, keep_bytes=3500)   # about 1.5 kB each, the record included
    assert [i.id for i in store.all()] == ["20261204-120000-1", "20261205-120000-1"]
    store.prune(keep_count=10, keep_bytes=1)    # the newest is always kept
    assert [i.id for i in store.all()] == ["20261205-120000-1"]


def test_an_unreadable_record_is_skipped(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path)
    incident(store, 1)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "incident.json").write_text("{not json")
    assert len(store.all()) == 1


def test_the_verb_lists_and_shows(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path)}
    empty = run_sparktui("incidents", env=env)
    assert empty.returncode == 0 and "no incidents kept" in empty.stdout
    made = incident(IncidentStore(tmp_path / "sparktui" / "incidents"), 3, "NCCL WARN timeout\n")
    listed = run_sparktui("incidents", "--json", env=env)
    data = json.loads(listed.stdout)
    assert [i["id"] for i in data["incidents"]] == [made.id] and bad_times(data) == []
    shown = run_sparktui("incidents", "show", made.id, env=env)
    assert shown.returncode == 0 and "NCCL WARN timeout" in shown.stdout and "vllm.log.tail" in shown.stdout
    wrong = run_sparktui("incidents", "show", "nope", env=env)
    assert wrong.returncode == 2 and made.id in wrong.stderr
