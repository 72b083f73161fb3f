"""vLLM log intelligence (pure code: no Textual, no asyncssh).

Layers, each usable alone:

* ``line``     — :func:`parse_line` (text -> :class:`LogRecord`, never raises), :func:`strip_ansi`,
                 :func:`parse_physical_line` (a glued physical line -> several records).
* ``stream``   — :class:`LineSplitter` (bytes -> records; ``\\r`` ends a progress record; bounded memory)
                 and :class:`LogReader` (bytes -> :class:`LogRecord` list).
* ``stages``   — :class:`Timeline`, the init-stage machine (still being written).
"""

from sparktui.domain.logs.line import LogRecord, Progress, parse_line, parse_physical_line, strip_ansi
from sparktui.domain.logs.stream import LineSplitter, LogReader

__all__ = [
    "LineSplitter",
    "LogReader",
    "LogRecord",
    "Progress",
    "parse_line",
    "parse_physical_line",
    "strip_ansi",
]
