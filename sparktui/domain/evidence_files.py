"""An incident's evidence as files: each node's answer (``sparktui/node/evidence.py``, the kernel reader
``sparktui/node/kernel_log.py``) turned into plain text, one file per kind of evidence and node. Pure: the
collector (``sparktui.remote.evidence``) gathers, this module writes the words.

File names: ``vllm-<node>.log`` (the vLLM log's last lines), ``ray-<node>.log`` (its Ray worker logs),
``stacks-<node>.txt`` (py-spy dumps, or why there are none, and /proc's view), ``kernel-<node>.txt``,
``nccl.txt`` (the NCCL lines and the NCCL/UCX/GLOO environment), ``ray-nodes.txt``, ``argv.txt``,
``config.toml``, ``timeline.txt``, ``missing.txt`` (what could not be taken, and why).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sparktui.domain.wall_time import iso

#: Kernel lines kept when the journal cannot be read and dmesg is read instead.
DMESG_KEEP = 300


def file_part(node: str) -> str:
    """A node's name as part of a file name (its safe characters; ``_`` for the others)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", node) or "node"


def _lines(items: Iterable[str]) -> str:
    return "".join(f"{line}\n" for line in items)


def vllm_log_text(answer: Mapping[str, Any]) -> str | None:
    """The vLLM log's last lines, or ``None`` when this node has no vLLM log."""
    log = answer.get("vllm_log")
    if not isinstance(log, Mapping):
        return None
    if log.get("error"):
        return f"{log.get('path')}: not readable: {log['error']}\n"
    lines = log.get("lines") or ()
    head = f"==> {log.get('path')} ({log.get('size', 0)} bytes; its last {len(lines)} lines) <==\n"
    return head + _lines(lines)


def ray_logs_text(answer: Mapping[str, Any]) -> str:
    ray = answer.get("ray_logs") or {}
    if ray.get("error"):
        return f"{ray.get('dir')}: no Ray session logs: {ray['error']}\n"
    files = ray.get("files") or []
    if not files:
        return f"{ray.get('dir')}: no Ray log file has any output yet\n"
    out: list[str] = []
    for f in files:
        if f.get("error"):
            out.append(f"==> {f.get('name')}: not readable: {f['error']} <==\n")
            continue
        out.append(f"==> {f.get('name')} ({f.get('size', 0)} bytes) <==\n" + _lines(f.get("lines", ())))
    return "\n".join(out)


def _process_line(p: Mapping[str, Any]) -> str:
    started = iso(p["started_at"]) if isinstance(p.get("started_at"), (int, float)) else "?"
    argv = " ".join(p.get("argv") or ()) or "?"
    return f"pid {p.get('pid')}  state {p.get('state') or '?'}  wchan {p.get('wchan') or '-'}  " \
           f"started {started}\n  argv: {argv[:2000]}"


def stacks_text(answer: Mapping[str, Any]) -> str:
    """py-spy's dumps (or the clear word that py-spy is missing), then /proc's view of every process."""
    stacks = answer.get("stacks") or {}
    processes = answer.get("processes") or []
    out: list[str] = []
    if stacks.get("missing"):
        out.append(str(stacks["missing"]) + "\n")
    else:
        out.append(f"stack dumps by {stacks.get('tool')}:\n")
        for dump in stacks.get("dumps") or []:
            rc = dump.get("rc")
            status = "" if rc == 0 else f" (exit {rc})"
            out.append(f"==> pid {dump.get('pid')}{status} <==\n{dump.get('text', '')}")
        if not stacks.get("dumps"):
            out.append("(no Python process of ours to dump)\n")
    out.append(f"\nprocesses of ours on {answer.get('node')} (from /proc): {len(processes)}\n")
    out.extend(_process_line(p) + "\n" for p in processes)
    if not processes:
        out.append("(none: no vLLM or Ray process of ours runs here)\n")
    return "".join(out)


def nccl_text(answers: Mapping[str, Mapping[str, Any]]) -> str:
    """Per node: the NCCL lines of its vLLM log and the NCCL/UCX/GLOO environment of its engine processes
    (each distinct environment once, with the pids that share it)."""
    out: list[str] = []
    for node, answer in answers.items():
        log = answer.get("vllm_log")
        if isinstance(log, Mapping):
            nccl = log.get("nccl") or []
            out.append(f"== {node}: NCCL lines of {log.get('path')}: {len(nccl)} ==\n" + _lines(nccl))
        envs: dict[tuple[tuple[str, str], ...], list[int]] = {}
        for p in answer.get("processes") or []:
            envs.setdefault(tuple(sorted((p.get("env") or {}).items())), []).append(int(p.get("pid", 0)))
        if not envs:
            out.append(f"== {node}: no engine process, so no environment to read ==\n")
        for env, pids in envs.items():
            shown = ", ".join(str(p) for p in pids[:12]) + (" …" if len(pids) > 12 else "")
            out.append(f"== {node}: NCCL_*/UCX_*/GLOO_* environment of pid {shown} ==\n"
                       + (_lines(f"{k}={v}" for k, v in env) or "(none set)\n"))
    return "\n".join(out) if out else "no node answered\n"


def argv_text(answers: Mapping[str, Mapping[str, Any]], planned: Mapping[str, Sequence[str]]) -> str:
    """The engine's argv as it runs (the vLLM processes of each node) and as the config plans it."""
    out: list[str] = []
    for node, answer in answers.items():
        running = [p for p in answer.get("processes") or []
                   if any("vllm" in a for a in (p.get("argv") or [])[:4])]
        out.append(f"== {node}: vLLM processes running: {len(running)} ==\n")
        out.extend(f"pid {p.get('pid')}: {' '.join(p.get('argv') or ())}\n" for p in running)
    for node, argv in planned.items():
        out.append(f"== {node}: as the config plans it ==\n{' '.join(argv)}\n")
    return "".join(out)


def kernel_text(node: str, report: Mapping[str, Any] | None, dmesg: Sequence[str] | None,
                since: float | None) -> str:
    """The kernel's (and the memory watchdogs') lines on this node since the engine started: OOM kills,
    Xid, NVRM. ``report``: the kernel reader's answer; ``dmesg``: the lines read when the journal was not."""
    when = iso(since) if since is not None else "this boot"
    out = [f"kernel and memory-watchdog messages on {node} since {when}:\n"]
    current = (report or {}).get("current") or {}
    lines = current.get("lines") or []
    if current.get("error") or report is None:
        why = current.get("error") or "the kernel reader did not answer"
        out.append(f"(journal not read: {why}; dmesg instead)\n")
        lines = list(dmesg or [])
        if dmesg is None:
            out.append("(dmesg not readable either)\n")
    for key in ("limited", "cut"):
        if current.get(key):
            out.append(f"({current[key]})\n")
    out.append(_lines(lines) if lines else "none: no OOM kill, Xid, NVRM error, panic or lockup\n")
    return "".join(out)


def dmesg_matching(text: str, needles: Sequence[str]) -> list[str]:
    return [line for line in text.splitlines() if any(n in line for n in needles)][-DMESG_KEEP:]


def engine_started_at(answers: Iterable[Mapping[str, Any]]) -> float | None:
    """When the engine's oldest process of ours started (the kernel's lines are read from then)."""
    starts = [p["started_at"] for a in answers for p in a.get("processes") or []
              if isinstance(p.get("started_at"), (int, float)) and p["started_at"] > 0]
    return min(starts) if starts else None
