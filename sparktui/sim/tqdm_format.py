"""A tqdm progress line as tqdm itself prints it, for the demo's generated bars.

The demo writes its progress bars from the story's pace instead of replaying recorded ones, so their
``[elapsed<remaining, rate]`` agree with the clock. The arithmetic follows tqdm 4.x (``format_interval``,
``format_meter``'s ``rate_fmt`` and its Unicode ``Bar``); tqdm is not a dependency of the dashboard, and
these few lines are all the demo needs of it.
"""

from __future__ import annotations

#: tqdm's Unicode bar: a space, then the eighths from ▏ to █.
_BLOCKS = " " + "".join(map(chr, range(0x258F, 0x2587, -1)))


def interval(seconds: float) -> str:
    """``mm:ss`` (``h:mm:ss`` from an hour), as ``tqdm.format_interval``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _timing(n: int, total: int, elapsed: float) -> str:
    """``00:19<02:52,  4.67s/it``: tqdm's inverse rate (``s/it``) once an item takes over a second."""
    if n == 0 or elapsed <= 0:
        return f"{interval(elapsed)}<?, ?it/s"
    rate = n / elapsed
    remaining = interval((total - n) / rate)
    speed = f"{1 / rate:5.2f}s/it" if rate < 1 else f"{rate:5.2f}it/s"
    return f"{interval(elapsed)}<{remaining}, {speed}"


def vllm_bar(desc: str, n: int, total: int, elapsed: float) -> str:
    """vLLM's ``bar_format`` for weights: ``desc:  10% Completed | 4/41 [00:19<02:52,  4.67s/it]``."""
    return f"{desc}: {100 * n / total:3.0f}% Completed | {n}/{total} [{_timing(n, total, elapsed)}]"


def bar(desc: str, n: int, total: int, elapsed: float, width: int) -> str:
    """tqdm's default line, a ``width``-cell bar: ``desc:  50%|█████     | 5/10 [00:01<00:01, 5.00it/s]``."""
    eighths = int(n / total * width * 8)
    full, part = divmod(eighths, 8)
    cells = _BLOCKS[-1] * full
    if full < width:
        cells += _BLOCKS[part] + " " * (width - full - 1)
    return f"{desc}: {100 * n / total:3.0f}%|{cells}| {n}/{total} [{_timing(n, total, elapsed)}]"
