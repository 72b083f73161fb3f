"""The one duration formatter (stage bars, ``sparktui timeline``/``history``, engine and readiness texts).

Imports nothing: headless verbs use it without loading anything else.
"""

from __future__ import annotations


def format_duration(seconds: float, *, tenths: bool = True) -> str:
    """Compact human duration: ``3.2s``, ``42s``, ``14m50s``, ``2h03m``.

    ``tenths=False`` rounds the last ten seconds to whole ones too (``3s``): next to a stage bar that
    redraws every second, a tenth that flickers is noise."""
    seconds = max(0.0, float(seconds))
    if tenths and seconds < 10:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    hours, rest = divmod(whole, 3600)
    return f"{hours}h{rest // 60:02d}m"
