"""What each exit status of a verb means: one meaning per number, the same for every verb.

Scripts branch on these (``sparktui status || page-someone``), so a number never takes a second meaning:
a refusal because another operation runs is BUSY, never "failed" or "bad usage". The README's exit-status
table is this enum, in words.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    #: Done, or everything checked is well.
    OK = 0
    #: The thing checked is not well: a node unreachable, a failed start, a log that shows a failure.
    NOT_WELL = 1
    #: Bad usage, config or input: nothing was done (argparse's own usage errors exit 2 too).
    USAGE = 2
    #: Not implemented: kept for what a verb cannot do yet; no verb exits with it today.
    NOT_IMPLEMENTED = 3
    #: ``status``: the engine was ready and cannot serve now (degraded or wedged).
    CANNOT_SERVE = 4
    #: Refused because another sparktui operation holds the operation lock: try again when it ends.
    BUSY = 5
    #: ``start --wait`` / ``restart --wait``: a person's ``stop`` (another sparktui, or the dashboard) ended
    #: the engine before it was ready: a stop, as asked, not a failure.
    STOPPED = 6
    #: ``upgrade`` / ``rollback``: the new image was tried and rolled back; the previous one serves again.
    ROLLED_BACK = 7
    #: ``upgrade`` / ``rollback``: refused before any downtime (a check failed): nothing was changed.
    REFUSED = 8
    #: Interrupted (Ctrl-C), as the shell reports SIGINT.
    INTERRUPTED = 130
    #: The reader of stdout went away (``sparktui logs | head``), as the shell reports SIGPIPE.
    BROKEN_PIPE = 141

    @classmethod
    def of(cls, ok: bool) -> ExitStatus:
        """OK when ``ok``, else NOT_WELL: the verdict of a check."""
        return cls.OK if ok else cls.NOT_WELL
