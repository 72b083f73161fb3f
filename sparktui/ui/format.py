"""Small text formatters shared by the widgets: sizes, durations, rates, bars.

Unknown values are ``None`` everywhere and render as "unknown" (or "–" where space is short), never as 0:
a GB10 reports no GPU memory through NVML, and a zero there would be a lie.
"""

from __future__ import annotations

from sparktui.domain.durations import format_duration

UNKNOWN = "unknown"


def gib(value: float | None, digits: int = 1) -> str:
    return UNKNOWN if value is None else f"{value:.{digits}f}"


def duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h03m`` — the compact form used next to stage bars (whole seconds)."""
    return "" if seconds is None else format_duration(seconds, tenths=False)


def rate_gbps(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}%"


def number(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}f}{unit}"


def bar(fraction: float | None, width: int) -> str:
    """A text bar of ``width`` cells with eighth-block precision; ``None`` draws a dotted (unknown) bar."""
    if width <= 0:
        return ""
    if fraction is None:
        return "┄" * width
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part and full < width else ""
    return ("█" * full + partial).ljust(width, " ")
