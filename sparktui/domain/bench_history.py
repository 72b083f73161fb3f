"""The bench history: one JSON line per ``sparktui bench`` sweep in ``$XDG_STATE_HOME/sparktui/bench.jsonl``,
beside the run history (``runs.jsonl``) and written the same way (one ``O_APPEND`` write per line)."""

from __future__ import annotations

import json
from pathlib import Path

from sparktui.domain.bench import BenchRecord
from sparktui.domain.history import append_line, state_dir

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
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        out: list[BenchRecord] = []
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                out.append(BenchRecord.from_json(json.loads(line)))
            except ValueError:  # json.JSONDecodeError is one
                continue
        out.sort(key=lambda r: r.started_at)
        return out
