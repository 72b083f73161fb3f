"""Whole-log convenience and rendering: ``parse_log_text``, ``timeline_from_bytes``, human table."""

from __future__ import annotations

from sparktui.domain.logs.stages import Timeline, TimelineSnapshot
from sparktui.domain.logs.stream import LineSplitter

_CHUNK = 1 << 20


def timeline_from_bytes(data: bytes, expected_nodes: int | None = None) -> TimelineSnapshot:
    """Read a whole log (bytes as on disk) through the byte splitter and the stage machine."""
    timeline = Timeline(expected_nodes)
    splitter = LineSplitter()
    for i in range(0, len(data), _CHUNK):
        timeline.feed_text(splitter.feed_block(data[i : i + _CHUNK]))
    timeline.feed_lines(splitter.flush())
    return timeline.snapshot()


def parse_log_text(text: str, expected_nodes: int | None = None) -> TimelineSnapshot:
    return timeline_from_bytes(text.encode("utf-8", "surrogatepass"), expected_nodes)


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 120:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def render_human(snap: TimelineSnapshot) -> str:
    lines: list[str] = []
    lines.append(f"vLLM {snap.vllm_version or '?'}  ·  {snap.model or 'model ?'}")
    lines.append(f"outcome: {snap.outcome.upper()}")
    lines.append("")
    lines.append(f"{'STAGE':<12} {'STATUS':<8} {'STARTED':<15} {'ENDED':<15} {'TOOK':>8}  PROGRESS")
    for st in snap.stages:
        progress = f"{st.progress.done}/{st.progress.total}" if st.progress is not None else ""
        marker = ""
        if st.name == snap.current:
            marker = "  <- failed here" if st.status == "failed" else "  <- now"
        lines.append(
            f"{st.name:<12} {st.status:<8} {st.started or '-':<15} {st.ended or '-':<15} "
            f"{_fmt_seconds(st.seconds):>8}  {progress}{marker}"
        )
    if snap.facts:
        lines.append("")
        lines.append("Facts:")
        width = max(len(k) for k in snap.facts)
        for key, value in snap.facts.items():
            lines.append(f"  {key:<{width}}  {value}")
    if snap.nodes:
        lines.append("")
        lines.append("Nodes: " + ", ".join(snap.nodes))
    if snap.failure is not None:
        f = snap.failure
        lines.append("")
        lines.append(f"FAILED: {f.kind} during {f.stage}")
        lines.append(f"  {f.message}")
        lines.append(f"  hint: {f.hint}")
    return "\n".join(lines)
