"""The bench history: one JSON line per ``sparktui bench`` sweep in ``$XDG_STATE_HOME/sparktui/bench.jsonl``,
beside the run history (``runs.jsonl``) and written the same way (one ``O_APPEND`` write per line)."""

from __future__ import annotations

import json
from pathlib import Path

from sparktui.domain.bench import BenchRecord
from sparktui.domain.history import append_line, read_lines, state_dir

BENCH_FILE = "bench.jsonl"


def default_bench_path() -> Path:
    return state_dir() / BENCH_FILE


class BenchStore:
    """Reading skips lines it cannot parse (a crash mid-write, a newer schema)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_bench_path()

    def append(self, record: BenchRecord) -> None:
        append_line(self.path, json.dumps({"v": 1, **record.to_json()}, separators=(",", ":")))

    def load(self) -> list[BenchRecord]:
        """All sweeps, oldest first."""
        out = read_lines(self.path, lambda line: BenchRecord.from_json(json.loads(line)))
        out.sort(key=lambda r: r.started_at)
        return out


def latest_with_fingerprint(records: list[BenchRecord], key: str, profile: str | None = None
                            ) -> BenchRecord | None:
    """The newest sweep of the setup whose fingerprint ``key`` is given (of ``profile`` when given) that
    measured anything: the baseline a later measurement of the same setup is held against."""
    same = [r for r in records if (r.fingerprint or {}).get("key") == key
            and (profile is None or r.profile == profile) and any(lv.completed for lv in r.levels)]
    return max(same, key=lambda r: r.started_at) if same else None
