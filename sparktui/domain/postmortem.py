"""Why a node or its engine died, read from what the kernel and the system's journal kept.

"The box died" hides different failures that want different responses (field reports from two-Spark
clusters): power, firmware or hardware (the journal stops mid-line, nothing in pstore, the box reboots); a
userspace memory watchdog (earlyoom, systemd-oomd, a vendor's anti-OOM daemon) SIGKILLing the engine while
the box stays up; the kernel's OOM killer; the GPU driver out of unified memory (``NV_ERR_NO_MEMORY``), which
can wedge the whole host with no OOM kill; a GPU Xid; a panic or a lockup. This module turns the lines the
node-side reader (``sparktui/node/kernel_log.py``) returns into events, and a node's previous boot into one
verdict with the evidence and what to do.

The node reader keeps only lines that hold one of ``NEEDLES``; the patterns below classify them. Both are
here, so the two never disagree. Formats are the kernel's, NVIDIA's driver's (``NVRM: Xid (PCI:…): N,
pid=…, name=…``) and the watchdogs' own, as they print them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sparktui.domain.wall_time import iso


class Cause(StrEnum):
    KERNEL_PANIC = "kernel_panic"
    LOCKUP = "lockup"
    HARDWARE_ERROR = "hardware_error"
    THERMAL = "thermal"
    GPU_XID = "gpu_xid"
    GPU_NO_MEMORY = "gpu_no_memory"
    KERNEL_OOM = "kernel_oom"
    USERSPACE_KILLER = "userspace_killer"
    POWER_LOSS = "power_loss"
    CLEAN_REBOOT = "clean_reboot"
    UNKNOWN = "unknown"


#: What the node reader keeps: a line holding any of these (case as printed).
NEEDLES: tuple[str, ...] = (
    "Out of memory", "oom-kill", "invoked oom-killer", "earlyoom", "systemd-oomd", "anti-oom", "NVRM",
    "Kernel panic", "soft lockup", "hard LOCKUP", "blocked for more than", "detected stall", "Hardware Error",
    "critical temperature", "Journal stopped", "systemd-shutdown", "reboot: ", "Reached target",
)

_TIME = re.compile(r"^(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)?) ")
_XID = re.compile(r"NVRM: Xid \((?P<pci>PCI:[0-9a-fA-F:.]+)\): (?P<xid>\d+)(?:, pid=(?P<pid>'?[^,]*'?), "
                  r"name=(?P<name>[^,]*))?(?:, (?P<rest>.*))?")
_KERNEL_OOM = re.compile(r"(?:Memory cgroup )?[Oo]ut of memory: Kill(?:ed)? process (?P<pid>\d+) "
                         r"\((?P<name>[^)]*)\)")
_OOM_TASK = re.compile(r"oom-kill:.*?\btask=(?P<name>[^,]+),pid=(?P<pid>\d+)")
_EARLYOOM = re.compile(r"earlyoom(?:\[\d+\])?: sending (?P<sig>SIG\w+) to process (?P<pid>\d+)"
                       r"(?: uid \d+)? \"(?P<name>[^\"]*)\"")
_OOMD = re.compile(r"systemd-oomd(?:\[\d+\])?: Killed (?P<unit>\S+) due to "
                   r"(?P<why>memory [\w ]+?)(?: for| \(|$)")
_ANTI_OOM = re.compile(r"anti-oom\S*: .*\b(?:kill|SIGKILL)", re.IGNORECASE)
_NO_MEMORY = re.compile(r"NV_ERR_NO_MEMORY")
_PANIC = re.compile(r"Kernel panic - not syncing: (?P<why>.*)")
_LOCKUP = re.compile(r"soft lockup - CPU#\d+ stuck for \d+s!.*|hard LOCKUP on cpu \d+|"
                     r"task \S+ blocked for more than \d+ seconds|rcu\w*: .*detected stalls")
_HARDWARE = re.compile(r"\[Hardware Error\]: (?P<what>.*)")
_THERMAL = re.compile(r"critical temperature reached.*")
#: A previous boot that ended with these in its last lines was shut down or rebooted cleanly.
_CLEAN_END = re.compile(r"Journal stopped|systemd-shutdown\[\d+\]|reboot: (?:Restarting system|Power down)|"
                        r"Reached target .*(?:Shutdown|Reboot|Power-?Off)", re.IGNORECASE)

#: NVIDIA's Xid catalog, the common ones: (what it is, whose fault as a first guess).
XIDS: Mapping[int, tuple[str, str]] = {
    13: ("graphics engine exception", "application"),
    31: ("GPU memory page fault", "application"),
    43: ("GPU stopped processing", "application"),
    45: ("preemptive cleanup after an earlier error", "follows another Xid"),
    48: ("double-bit ECC error", "hardware"),
    61: ("internal micro-controller breakpoint", "driver or firmware"),
    62: ("internal micro-controller halt", "driver or firmware"),
    63: ("ECC page retirement or row remapping", "hardware"),
    64: ("ECC page retirement or row remapping failure", "hardware"),
    69: ("graphics engine class error", "application or driver"),
    74: ("NVLink error", "hardware"),
    79: ("GPU has fallen off the bus", "hardware or power"),
    92: ("high single-bit ECC error rate", "hardware"),
    94: ("contained ECC error", "hardware"),
    95: ("uncontained ECC error", "hardware"),
    109: ("context switch timeout", "application or driver"),
    119: ("GSP RPC timeout", "driver or firmware"),
    120: ("GSP error", "driver or firmware"),
}
#: Xids after which the GPU needs a reset or the node a reboot (not an application's own fault).
_FATAL_XIDS = frozenset({48, 62, 74, 79, 95, 119, 120})


@dataclass(frozen=True)
class KernelEvent:
    cause: Cause
    #: What happened, in words ("the kernel's OOM killer killed python3 (pid 4242)").
    what: str
    #: The line as the journal printed it.
    line: str
    #: Its time as printed (ISO 8601, the journal's ``short-iso-precise``), when it has one.
    at: str | None = None
    #: The process it names, when it names one.
    process: str | None = None
    xid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause.value, "what": self.what, "at": self.at, "process": self.process,
                "xid": self.xid, "line": self.line}


def event(line: str) -> KernelEvent | None:
    """The event one journal or pstore line tells of, or None."""
    m = _TIME.match(line)
    at = m["at"] if m else None
    if (x := _XID.search(line)) is not None:
        number = int(x["xid"])
        meaning, whose = XIDS.get(number, (f"Xid {number}", "see NVIDIA's Xid catalog"))
        name = (x["name"] or "").strip()
        by = f" in {name}" if name and name != "<unknown>" else ""
        what = f"GPU Xid {number} ({meaning}; {whose}){by} on {x['pci']}"
        return KernelEvent(Cause.GPU_XID, what, line, at, name or None, number)
    if _NO_MEMORY.search(line):
        return KernelEvent(Cause.GPU_NO_MEMORY, "the GPU driver ran out of unified memory (NV_ERR_NO_MEMORY)",
                           line, at)
    if (o := _KERNEL_OOM.search(line) or _OOM_TASK.search(line)) is not None:
        return KernelEvent(Cause.KERNEL_OOM, f"the kernel's OOM killer killed {o['name']} (pid {o['pid']})",
                           line, at, o["name"])
    if (e := _EARLYOOM.search(line)) is not None:
        what = f"earlyoom sent {e['sig']} to {e['name']} (pid {e['pid']})"
        return KernelEvent(Cause.USERSPACE_KILLER, what, line, at, e["name"])
    if (d := _OOMD.search(line)) is not None:
        return KernelEvent(Cause.USERSPACE_KILLER, f"systemd-oomd killed {d['unit']} ({d['why']})", line, at)
    if _ANTI_OOM.search(line):
        return KernelEvent(Cause.USERSPACE_KILLER, "an anti-OOM watchdog killed a process", line, at)
    if (p := _PANIC.search(line)) is not None:
        return KernelEvent(Cause.KERNEL_PANIC, f"kernel panic: {p['why'].strip()}", line, at)
    if (lk := _LOCKUP.search(line)) is not None:
        return KernelEvent(Cause.LOCKUP, lk.group(0).strip(), line, at)
    if (h := _HARDWARE.search(line)) is not None:
        return KernelEvent(Cause.HARDWARE_ERROR, f"hardware error: {h['what'].strip()}", line, at)
    if (t := _THERMAL.search(line)) is not None:
        return KernelEvent(Cause.THERMAL, t.group(0).strip(), line, at)
    return None


def events(lines: Iterable[str]) -> list[KernelEvent]:
    """The events of ``lines``, oldest first; one kill told twice in a row (the kernel's ``oom-kill:``
    summary and its ``Killed process`` line) counted once."""
    out: list[KernelEvent] = []
    for found in map(event, lines):
        if found is not None and not (out and (out[-1].cause, out[-1].what) == (found.cause, found.what)):
            out.append(found)
    return out


#: The order a verdict weighs causes in: what ends a boot by itself first; a kill that only ends a process
#: after what may have followed from it.
_RANK = (Cause.KERNEL_PANIC, Cause.LOCKUP, Cause.HARDWARE_ERROR, Cause.THERMAL, Cause.GPU_XID,
         Cause.GPU_NO_MEMORY, Cause.KERNEL_OOM, Cause.USERSPACE_KILLER)

_HINTS: Mapping[Cause, str] = {
    Cause.KERNEL_PANIC: "the kernel panicked: its record (pstore, the journal) holds the stack — with NVRM "
                        "in it, report it with nvidia-bug-report.sh",
    Cause.LOCKUP: "a CPU or task hung in the kernel: check the driver version and the kernel's messages "
                  "before it; a watchdog may have rebooted the node",
    Cause.HARDWARE_ERROR: "the platform reported a hardware error: run NVIDIA's field diagnostic "
                          "(partnerdiag --field) before trusting the node again",
    Cause.THERMAL: "the node overheated and shut down: check airflow and the fan before restarting",
    Cause.GPU_XID: "a GPU error: an application Xid (13, 31, 43) clears with a restart of the engine; "
                   "hardware, driver or power ones (48, 62, 74, 79, 95, 119, 120) need a reset of the GPU "
                   "or the node, and a diagnostic if they come back",
    Cause.GPU_NO_MEMORY: "unified memory ran out inside the GPU driver, which can wedge the whole node with "
                         "no OOM kill: lower serving.gpu_memory_utilization or max_model_len and leave the "
                         "system memory headroom",
    Cause.KERNEL_OOM: "the node ran out of memory and the kernel killed a process: the engine asked more "
                      "than the node has (on unified memory the GPU's share is the system's) — lower "
                      "gpu_memory_utilization or max_model_len",
    Cause.USERSPACE_KILLER: "a memory watchdog in userspace killed it (earlyoom, systemd-oomd or a vendor's "
                            "anti-OOM daemon): exclude the engine from its targets or size the engine below "
                            "its threshold",
    Cause.POWER_LOSS: "the journal stops mid-run with no shutdown, no panic and nothing in pstore: power, "
                      "firmware or hardware — check the supply, then run NVIDIA's field diagnostic "
                      "(partnerdiag --field)",
    Cause.CLEAN_REBOOT: "it was shut down or rebooted cleanly: by a person, an update or a scheduled job",
    Cause.UNKNOWN: "the previous boot's journal is not kept: set Storage=persistent in "
                   "/etc/systemd/journald.conf so the next one is",
}


@dataclass(frozen=True)
class Verdict:
    cause: Cause
    #: One sentence: what ended it.
    summary: str
    hint: str
    #: The events behind it, oldest first (the others seen too).
    evidence: tuple[KernelEvent, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause.value, "summary": self.summary, "hint": self.hint,
                "evidence": [e.to_json() for e in self.evidence]}


def _ranked(found: Sequence[KernelEvent]) -> KernelEvent | None:
    def rank(e: KernelEvent) -> int:
        if e.cause is Cause.GPU_XID and e.xid not in _FATAL_XIDS:
            return len(_RANK)  # an application's Xid explains a process, not a boot
        return _RANK.index(e.cause) if e.cause in _RANK else len(_RANK) + 1
    return min(found, key=rank, default=None)


def boot_verdict(lines: Sequence[str], tail: Sequence[str], pstore: Sequence[str], *,
                 journal_error: str | None = None) -> Verdict:
    """How a node's previous boot ended, from its journal's matching lines, its last lines and pstore."""
    found = events([*lines, *pstore])
    clean = any(_CLEAN_END.search(line) for line in tail)
    top = _ranked(found)
    if top is not None and (not clean or top.cause in (Cause.KERNEL_PANIC, Cause.THERMAL)):
        return Verdict(top.cause, top.what, _HINTS[top.cause], tuple(found))
    if clean:
        return Verdict(Cause.CLEAN_REBOOT, "shut down or rebooted cleanly", _HINTS[Cause.CLEAN_REBOOT],
                       tuple(found))
    if tail:
        last = tail[-1]
        return Verdict(Cause.POWER_LOSS, f"the journal stops mid-run at: {last[:160]}",
                       _HINTS[Cause.POWER_LOSS], tuple(found))
    why = f" ({journal_error})" if journal_error else ""
    return Verdict(Cause.UNKNOWN, f"nothing kept of the previous boot{why}", _HINTS[Cause.UNKNOWN])


@dataclass(frozen=True)
class NodeReport:
    """One node's answer (``sparktui/node/kernel_log.py``), read."""

    node: str
    boot_id: str | None
    booted_at: float | None
    previous: Verdict
    #: Events of the current boot since the time asked (the engine's start), oldest first.
    since: tuple[KernelEvent, ...]
    #: What could not be read, in words (no access to the system journal, pstore unreadable …).
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def from_json(cls, node: str, data: Mapping[str, Any]) -> NodeReport:
        previous = data.get("previous") or {}
        current = data.get("current") or {}
        files = (data.get("pstore") or {}).get("files") or []
        pstore_lines = [line for f in files for line in (f.get("lines") or [])]
        notes = []
        for label, part in (("previous boot", previous), ("this boot", current)):
            for key in ("limited", "cut"):
                if part.get(key):
                    notes.append(f"{label}: {part[key]}")
        if current.get("error"):
            notes.append(f"this boot: {current['error']}")
        for f in files:
            if f.get("error"):
                notes.append(f"pstore {f.get('name')}: {f['error']}")
        verdict = boot_verdict(previous.get("lines") or [], previous.get("tail") or [], pstore_lines,
                               journal_error=previous.get("error"))
        booted = data.get("booted_at")
        return cls(node, data.get("boot_id"), float(booted) if booted is not None else None, verdict,
                   tuple(events(current.get("lines") or [])), tuple(notes))

    def killed(self, names: Iterable[str]) -> list[KernelEvent]:
        """This boot's kills and GPU errors that name one of ``names`` (the engine's processes)."""
        wanted = tuple(names)
        return [e for e in self.since if e.process is not None and any(n in e.process for n in wanted)]

    def to_json(self) -> dict[str, Any]:
        booted = iso(self.booted_at) if self.booted_at is not None else None
        return {"node": self.node, "boot_id": self.boot_id, "booted_at": booted,
                "previous_boot": self.previous.to_json(), "since": [e.to_json() for e in self.since],
                "notes": list(self.notes)}
