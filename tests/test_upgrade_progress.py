"""An upgrade's progress on the head (``upgrade.json``): the record's round trip, garbled and partial text
read as "unknown", its phase by heartbeat, its one line; the upgrade's writer through the real node script
on a local head; the dashboard's watch of it (its stages as the running operation, its outcome after); and
the engine panel showing both."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from sparktui.config import SparkConfig, parse_config
from sparktui.domain.events import Event, OperationChanged, StepStatus, UpgradeSeen
from sparktui.domain.lifecycle.oplock import LockHolder
from sparktui.domain.upgrade import progress as U
from sparktui.domain.upgrade_view import upgrade_operation
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.transport import LocalTransport, TransportError
from sparktui.remote.upgrade_record import UpgradeRecorder, read_upgrade
from sparktui.remote.upgrade_watch import UpgradeWatch
from tests.ui_fakes import FIXED_NOW, make_app, settle

NEW_ID = "sha256:" + "b" * 64
OLD_ID = "sha256:" + "a" * 64
T0 = FIXED_NOW


def begun(**kw: object) -> U.UpgradeRecord:
    base: dict[str, object] = {"image": "vllm/vllm-openai:v0.22.0", "previous": "vllm/vllm-openai:v0.21.0",
                               "host": "laptop", "pid": 4242, "started": T0, "heartbeat": T0}
    base.update(kw)
    return U.UpgradeRecord(**base)  # type: ignore[arg-type]


def through_the_switch() -> U.UpgradeRecord:
    """image, way back, check, distribute, baseline done; the switch running since T0 + 100."""
    r = begun(image_id=NEW_ID, previous_id=OLD_ID)
    t = T0
    for name, message in (("image", "pulled"), ("way back", "kept"), ("check", "vLLM 0.22.0: every flag"),
                          ("distribute", "copied to spark2"), ("baseline", "measured now")):
        r = r.stage(name, "running", "", t)
        t += 20
        r = r.stage(name, "ok", message, t)
    return r.stage("switch", "running", "stop, then start on vllm/vllm-openai:v0.22.0", T0 + 100)


def test_the_record_round_trips_and_its_stages_keep_their_order_and_seconds() -> None:
    r = through_the_switch()
    assert [s.name for s in r.stages] == list(U.STAGES)
    assert U.UpgradeRecord.parse(r.to_json()) == r
    assert U.UpgradeRecord.parse("noise\n" + r.to_json() + "\n") == r   # the script's noise passed over
    check = r.stages[2]
    assert (check.status, check.seconds, check.message) == ("ok", 20.0, "vLLM 0.22.0: every flag")
    assert r.current is not None and r.current.name == "switch"
    done = r.stage("switch", "ok", "ready in 41 s", T0 + 141).finish("promoted", "as fast", 43.25, T0 + 160)
    assert done.stages[5].seconds == pytest.approx(41.0)
    # Never reached: skipped; the roll back was not needed.
    assert {s.name: s.status for s in done.stages}["roll back"] == "skipped"
    assert U.UpgradeRecord.parse(done.to_json()) == done
    # A stage still running when the upgrade ends failed with it.
    cut = r.finish("interrupted", "KeyboardInterrupt", None, T0 + 130)
    assert {s.name: s.status for s in cut.stages}["switch"] == "failed"


@pytest.mark.parametrize("text", [
    "not json", "[]", '{"image": 3}', '{"image": "x", "previous": "y"}',
    # cut short by a full disk: not a whole object
    begun().to_json()[:-40],
    # a stage with a status of another schema
    begun().to_json().replace('"status": "pending"', '"status": "paused"', 1),
    json.dumps({**json.loads(begun().to_json()), "stages": "all of them"}),
    json.dumps({**json.loads(begun().to_json()), "pid": "4242"}),
    json.dumps({**json.loads(begun().to_json()), "heartbeat": True}),
])
def test_a_garbled_or_partial_record_reads_as_unknown(text: str) -> None:
    record = U.UpgradeRecord.parse(text)
    assert record is U.UNKNOWN
    assert record.phase(T0) is U.Phase.UNKNOWN
    assert record.outcome_line(T0) == "upgrade: unknown (its record on the head cannot be read)"
    assert record.report(T0) == {"phase": "unknown", "text": record.outcome_line(T0)}
    assert record.shown_line(T0) == (record.outcome_line(T0), "error")


def test_none_written_is_none() -> None:
    assert U.UpgradeRecord.parse("{}\n") is None and U.UpgradeRecord.parse("") is None


def test_its_phase_follows_the_heartbeat_and_the_outcome() -> None:
    r = through_the_switch()
    assert r.phase(T0 + 100 + U.STALE_AFTER - 1) is U.Phase.RUNNING
    stale_at = T0 + 100 + U.STALE_AFTER + 300
    assert r.phase(stale_at) is U.Phase.STALE
    assert r.outcome_line(stale_at) == ("upgrade to vllm/vllm-openai:v0.22.0: not heard from for 5m45s at "
                                        "switch (laptop pid 4242): it stopped mid-way")
    assert r.headline() == ("upgrading to vllm/vllm-openai:v0.22.0 (bbbbbbbbbbbb) from "
                            "vllm/vllm-openai:v0.21.0")
    promoted = r.finish("promoted", "as fast", 32.94, T0 + 200)
    assert promoted.phase(T0 + 10_000) is U.Phase.ENDED
    assert promoted.shown_line(T0 + 300) == (
        "upgrade to vllm/vllm-openai:v0.22.0: promoted, downtime 32.9 s", "ok")
    assert promoted.shown_line(T0 + 200 + U.OUTCOME_SHOWN_FOR + 1) is None   # long after: nothing
    back = r.finish("rolled_back", "speed: 61 % of the baseline at concurrency 4", 50.0, T0 + 200)
    assert back.shown_line(T0 + 300) == (
        "upgrade to vllm/vllm-openai:v0.22.0: rolled back: speed: 61 % of the baseline at concurrency 4, "
        "downtime 50.0 s", "warning")
    assert r.shown_line(T0 + 101) is None   # while it runs, its stages say more


def test_the_status_report_names_its_stages_and_outcome() -> None:
    done = through_the_switch().finish("refused", "check: --foo is gone", None, T0 + 150)
    report = done.report(T0 + 200)
    assert report["phase"] == "ended" and report["outcome"] == "refused"
    assert [s["stage"] for s in report["stages"]] == list(U.STAGES)
    assert report["stages"][0] == {"stage": "image", "status": "ok", "message": "pulled", "seconds": 20.0}
    assert report["text"].startswith("upgrade to vllm/vllm-openai:v0.22.0: refused: check: --foo is gone (")


def test_status_prints_its_line_between_the_image_and_the_supervisor() -> None:
    from sparktui.commands.status import render

    done = through_the_switch().finish("promoted", "as fast", 32.94, T0 + 150)
    text = render({"cluster": "c", "nodes": [], "image": {"text": "image: vllm/vllm-openai:v0.22.0"},
                   "upgrade": done.report(T0 + 200), "supervisor": None})
    assert text.splitlines()[-3:-1] == ["image: vllm/vllm-openai:v0.22.0",
                                        done.status_line(T0 + 200)], text
    assert done.status_line(T0 + 200).startswith("upgrade to vllm/vllm-openai:v0.22.0: promoted, downtime "
                                                 "32.9 s (")


def test_as_an_operation_its_stages_are_the_steps() -> None:
    view = upgrade_operation(through_the_switch(), T0 + 112.5)
    assert view.kind == "upgrade" and view.running and view.message.startswith("upgrading to ")
    steps = {s.name: s for s in view.steps}
    assert steps["check"].status is StepStatus.OK and steps["check"].seconds == 20.0
    assert steps["switch"].status is StepStatus.RUNNING and steps["switch"].seconds == pytest.approx(12.5)
    assert steps["verify"].status is StepStatus.PENDING


def local_head(tmp_path: Path) -> SparkConfig:
    return parse_config({"nodes": [{"name": "spark1", "host": "localhost", "local": True, "role": "head",
                                    "python": sys.executable}],
                         "engine": {"runtime": "docker", "model": "/models/m", "image": "vllm:old",
                                    "tensor_parallel_size": 1, "state_dir": str(tmp_path)}})


async def test_the_upgrade_writes_it_through_the_node_script_and_a_reader_reads_it(tmp_path: Path) -> None:
    config = local_head(tmp_path)
    nodes = EngineNodes(config, {"spark1": LocalTransport("spark1")})
    await nodes.transports["spark1"].connect()
    assert await read_upgrade(nodes) is None   # no upgrade ever ran
    recorder = UpgradeRecorder(nodes, "laptop", 4242)
    recorder.stage("image", "running", "ignored: not begun")   # before ``begin``: nothing to keep
    recorder.begin("vllm:new", "vllm:old", dry_run=False)
    recorder.stage("image", "running", "docker pull")
    recorder.stage("image", "ok", "pulled", image_id=NEW_ID)
    recorder.stage("way back", "ok", "kept", previous_id=OLD_ID)
    await recorder.finish("rolled_back", "smoke: no answer", 12.5)
    record = await read_upgrade(nodes)
    assert record is not None and record == recorder.record
    assert (tmp_path / U.UPGRADE_FILE).is_file()
    assert (record.image, record.previous, record.image_id, record.previous_id) == (
        "vllm:new", "vllm:old", NEW_ID, OLD_ID)
    assert [(s.name, s.status) for s in record.stages[:3]] == [("image", "ok"), ("way back", "ok"),
                                                               ("check", "skipped")]
    assert (record.outcome, record.reason, record.downtime_s) == ("rolled_back", "smoke: no answer", 12.5)
    (tmp_path / U.UPGRADE_FILE).write_text('{"image": "vllm:new", "stag')   # garbled by hand
    assert await read_upgrade(nodes) is U.UNKNOWN


async def test_its_end_never_waits_on_the_writer_whatever_it_is_doing(tmp_path: Path) -> None:
    """A stage change met by the end (the refused upgrade: its failed stage, then at once its outcome)
    hung the upgrade forever once, on Python 3.11's ``wait_for`` swallowing the writer's cancel. Now the
    end is a word to the writer, never a cancel: every moment of the writer's loop ends within seconds."""
    config = local_head(tmp_path)
    nodes = EngineNodes(config, {"spark1": LocalTransport("spark1")})
    await nodes.transports["spark1"].connect()
    for pause in (0.0, 0.05, 0.5, 1.2):   # while writing, in the gap after a write, waiting for a change
        recorder = UpgradeRecorder(nodes, "laptop", 4242)
        recorder.begin("vllm:new", "vllm:old", dry_run=False)
        await asyncio.sleep(pause)
        recorder.stage("check", "failed", "vLLM 0.22.0 lacks --max-model-len — nothing was changed")
        async with asyncio.timeout(5):   # a write takes well under a second here; a heartbeat is 15 s
            await recorder.finish("refused", "check: lacks --max-model-len", None)
        record = await read_upgrade(nodes)
        assert record is not None and record.outcome == "refused", (pause, record)


async def test_the_dashboard_watch_shows_its_stages_then_its_outcome() -> None:
    """Read at every look while it runs (before and during its hold of the lock); once it ended, its
    outcome is the operation's last message and the line posted."""
    posted: list[Event] = []
    state: dict[str, U.UpgradeRecord | None] = {"record": None}
    reads: list[int] = []

    async def read() -> U.UpgradeRecord | None:
        reads.append(1)
        if state["record"] is U.UNKNOWN:
            raise TransportError("head unreachable")
        return state["record"]

    watch = UpgradeWatch(read, posted.append)
    assert await watch.look(None) is None and posted == [UpgradeSeen(None)]
    assert await watch.look(None) is None and len(reads) == 1   # idle: not read again for 15 s
    now = time.time()
    running = begun(started=now, heartbeat=now).stage("distribute", "running", "spark2: 4000 MB", now)
    state["record"] = running
    holder = LockHolder("upgrade", "`sparktui upgrade`", "laptop", 4242, now)
    view = await watch.look(holder)   # its hold of the lock: read now
    assert view is not None and view.running and view.kind == "upgrade"
    assert view.message == "upgrading to vllm/vllm-openai:v0.22.0 from vllm/vllm-openai:v0.21.0"
    assert await watch.look(None) is not None and len(reads) == 3   # running: read at every look
    state["record"] = running.finish("promoted", "as fast", 32.94, now)
    assert await watch.look(None) is None
    assert posted[-1] == UpgradeSeen("upgrade to vllm/vllm-openai:v0.22.0: promoted, downtime 32.9 s", "ok")
    end = watch.ended(time.time())
    assert end is not None and not end.running and end.ok and "promoted" in end.message


async def test_the_engine_panel_shows_the_stages_while_it_runs_and_one_line_after() -> None:
    from textual.widgets import Static

    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        record = through_the_switch()
        backend.post(OperationChanged(upgrade_operation(record, T0 + 112.5)))
        await settle(pilot, app)
        steps = str(app.query_one("#operation-steps", Static).render())
        assert steps.startswith("upgrade: running — upgrading to vllm/vllm-openai:v0.22.0 (bbbbbbbbbbbb) "
                                "from vllm/vllm-openai:v0.21.0  5/9"), steps
        assert "✓ check 20.0s  vLLM 0.22.0: every flag" in steps and "⟳ switch 12.5s" in steps, steps
        assert app.query_one("#btn-restart").disabled   # another's operation runs
        line = app.query_one("#engine-upgrade", Static)
        assert not line.display
        done = record.finish("rolled_back", "smoke: no answer", 41.0, T0 + 200)
        backend.post(OperationChanged(upgrade_operation(done, T0 + 201)),
                     UpgradeSeen(*(done.shown_line(T0 + 201) or ("", ""))))
        await settle(pilot, app)
        assert not app.query_one("#operation-steps", Static).display   # the engine serves: no step list
        assert line.display
        assert str(line.render()) == ("upgrade to vllm/vllm-openai:v0.22.0: rolled back: smoke: no answer, "
                                      "downtime 41.0 s")
        backend.post(UpgradeSeen(None))   # long after: gone
        await settle(pilot, app)
        assert not line.display
