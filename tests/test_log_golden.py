"""Every shared real vLLM log against its hand-reviewed expected timeline (tests/golden/timeline/).

Regenerate after an intended parser change with ``UPDATE_GOLDEN=1 pytest tests/test_log_golden.py``,
then review the diff against the log by hand before committing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sparktui.domain.logs import timeline_from_bytes

DATA = Path(__file__).parent / "data" / "vllm-logs"
GOLDEN = Path(__file__).parent / "golden" / "timeline"
LOGS = sorted(DATA.glob("*.txt"))


@pytest.mark.parametrize("log", LOGS, ids=[p.name[:40] for p in LOGS])
def test_golden_timeline(log: Path) -> None:
    got = timeline_from_bytes(log.read_bytes()).to_json()
    golden = GOLDEN / (log.stem + ".json")
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = json.loads(golden.read_text(encoding="utf-8"))
    assert got == expected


def test_every_log_has_a_golden() -> None:
    assert len(LOGS) == 17
    assert {p.stem for p in LOGS} == {p.stem for p in GOLDEN.glob("*.json")}
