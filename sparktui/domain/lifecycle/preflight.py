"""Preflight: judging facts gathered from every node into named checks (pure; the executor gathers).

Each check becomes one ``StepView`` so the UI, ``sparktui start`` and ``--dry-run`` show the same list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle.argv import expand_home
from sparktui.domain.lifecycle.fixes import MODEL_SYNC
from sparktui.domain.recipes import find_recipe, version_key


@dataclass(frozen=True)
class PreflightFacts:
    """What FACTS_PY reports for one node."""

    hostname: str = ""
    home: str = ""
    mem_total_kb: int | None = None
    mem_available_kb: int | None = None
    rdma: tuple[Mapping[str, str | None], ...] = ()
    dev_infiniband: bool = False
    ports_busy: tuple[int, ...] = ()
    processes: tuple[Mapping[str, object], ...] = ()
    #: FACTS_PY's "model" object (JSON: exists, files as [path, size] pairs, total_bytes, truncated).
    model: Mapping[str, Any] | None = None

    @classmethod
    def parse(cls, text: str) -> PreflightFacts:
        """FACTS_PY's output; ``ValueError`` when it holds no report (the script died before printing)."""
        data = last_json_object(text)
        if data is None:
            raise ValueError("no JSON report in the output")
        return cls(
            hostname=str(data.get("hostname", "")),
            home=str(data.get("home", "")),
            mem_total_kb=data.get("mem_total_kb"),
            mem_available_kb=data.get("mem_available_kb"),
            rdma=tuple(data.get("rdma") or ()),
            dev_infiniband=bool(data.get("dev_infiniband")),
            ports_busy=tuple(int(p) for p in data.get("ports_busy") or ()),
            processes=tuple(data.get("processes") or ()),
            model=data.get("model"),
        )


@dataclass(frozen=True)
class DockerContainer:
    name: str
    id: str
    state: str
    status: str = ""


def parse_docker_ps(text: str, prefix: str) -> tuple[DockerContainer, ...]:
    """``docker ps`` lines of ``argv.docker_ps``; only names that really start with ``<prefix>-``."""
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        name = parts[0].lstrip("/")
        if name.startswith(prefix + "-"):
            out.append(DockerContainer(name, parts[1], parts[2], parts[3] if len(parts) > 3 else ""))
    return tuple(out)


def model_host_path(config: SparkConfig) -> str | None:
    """The model directory as seen on the node (through the mounts for docker); ``None`` for a HF id."""
    model = config.engine.model
    if not model.startswith(("/", "~", ".")):
        return None
    if config.engine.runtime == "docker":
        for m in sorted(config.engine.mounts, key=lambda m: -len(m.target)):
            target = m.target.rstrip("/")
            if model == target or model.startswith(target + "/"):
                return m.source.rstrip("/") + model[len(target):]
    return model


#: Where the docker image keeps its Hugging Face cache (a mount onto it is the node's cache).
CONTAINER_HF_HOME = "/root/.cache/huggingface"


def model_hf_home(config: SparkConfig) -> str | None:
    """The node's HF cache that the engine reads a model id from: with docker, whatever the mounts put at
    the container's cache; on the host, ``engine.env``'s HF_HOME, else ``None`` (the node's own $HF_HOME
    or ~/.cache/huggingface)."""
    e = config.engine
    if e.runtime != "docker":
        return e.env.get("HF_HOME")
    return next((m.source for m in e.mounts if m.target.rstrip("/") == CONTAINER_HF_HOME), None)


def needed_memory_fraction(extra_args: Sequence[str]) -> float:
    """vLLM's ``--gpu-memory-utilization`` (default 0.9): the share of unified memory it will claim."""
    args = list(extra_args)
    for i, a in enumerate(args):
        if a.startswith("--gpu-memory-utilization") or a.startswith("--gpu_memory_utilization"):
            value = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
            try:
                return float(value)
            except ValueError:
                return 0.9
    return 0.9


def _view(name: str, node: str | None, status: StepStatus, message: str,
          tail: Sequence[str] = ()) -> StepView:
    return StepView(name=name, node=node, status=status, message=message, output_tail=tuple(tail))


# ---- per node ------------------------------------------------------------------------------------
def check_memory(node: str, facts: PreflightFacts, fraction: float) -> StepView:
    total, avail = facts.mem_total_kb, facts.mem_available_kb
    if not total or avail is None:
        return _view("free memory", node, StepStatus.WARNING, "MemAvailable unreadable")
    gib = avail / 1048576
    msg = f"{gib:.1f} GiB of {total / 1048576:.1f} GiB unified memory available"
    if avail < fraction * total:
        return _view("free memory", node, StepStatus.WARNING,
                     msg + f"; vLLM will claim {fraction:.0%} (--gpu-memory-utilization): "
                     "free memory or drop the page cache first")
    return _view("free memory", node, StepStatus.OK, msg)


def check_rdma(node: str, facts: PreflightFacts, devices: Sequence[str]) -> StepView:
    ports = [p for p in facts.rdma if not devices or p.get("device") in devices]
    if not facts.rdma:
        return _view("RDMA link", node, StepStatus.SKIPPED,
                     "no RDMA devices under /sys/class/infiniband (NCCL will use sockets)")
    if devices:
        absent = [d for d in devices if d not in {p.get("device") for p in facts.rdma}]
        if absent:
            return _view("RDMA link", node, StepStatus.FAILED,
                         "configured RDMA device(s) not present: " + ", ".join(absent))
    up = [p for p in ports if str(p.get("state") or "").endswith("ACTIVE")]
    desc = ", ".join(f"{p.get('device')}/{p.get('port')} {p.get('state')}" for p in ports)
    if not up:
        return _view("RDMA link", node, StepStatus.FAILED, "no RDMA port is ACTIVE: " + desc)
    if devices and len(up) < len(ports):
        return _view("RDMA link", node, StepStatus.WARNING, "not every port is up: " + desc)
    return _view("RDMA link", node, StepStatus.OK, desc)


def check_ports(node: str, facts: PreflightFacts, ports: Mapping[int, str]) -> StepView:
    busy = [f"{port} ({what})" for port, what in sorted(ports.items()) if port in facts.ports_busy]
    if busy:
        return _view("ports free", node, StepStatus.FAILED, "already in use: " + ", ".join(busy))
    return _view("ports free", node, StepStatus.OK,
                 ", ".join(f"{p} ({w})" for p, w in sorted(ports.items())) + " free")


def leftover_lines(node: str, processes: Sequence[Mapping[str, object]],
                   containers: Sequence[DockerContainer]) -> list[str]:
    lines = [f"{node}: container {c.name} ({c.state})" for c in containers]
    lines += [f"{node}: pid {p.get('pid')} {p.get('cmdline')}" for p in processes]
    return lines


def check_leftovers(node: str, facts: PreflightFacts, containers: Sequence[DockerContainer]) -> StepView:
    lines = leftover_lines(node, facts.processes, containers)
    if lines:
        return _view("leftovers", node, StepStatus.FAILED,
                     f"{len(lines)} leftover(s) of an earlier run: clean them first "
                     "(`sparktui stop`, or the clean action)", lines[-20:])
    return _view("leftovers", node, StepStatus.OK, "none")


# ---- across nodes --------------------------------------------------------------------------------
def check_model(config: SparkConfig, facts: Mapping[str, PreflightFacts]) -> list[StepView]:
    path = model_host_path(config)
    if path is None:
        return [_view("model files", None, StepStatus.SKIPPED,
                      f"{config.engine.model} is a Hugging Face id: each node downloads or uses its cache")]
    views = []
    listings: dict[str, dict[str, int]] = {}
    totals: dict[str, int] = {}
    head = config.head.name
    head_has = bool((facts[head].model or {}).get("files")) if head in facts else False
    # A worker that lacks the head's model, or has another, is repaired by copying the head's.
    fix = f"; `{MODEL_SYNC}` copies it from {head}"
    for node, f in facts.items():
        model = f.model or {}
        shown = expand_home(path, f.home or None)
        offer = fix if head_has and node != head else ""
        if not model.get("exists"):
            views.append(_view("model files", node, StepStatus.FAILED, f"{shown}: no such directory{offer}"))
            continue
        files = {str(r): int(s) for r, s in model.get("files") or []}
        if not files:
            views.append(_view("model files", node, StepStatus.FAILED, f"{shown}: directory is empty{offer}"))
            continue
        listings[node] = files
        totals[node] = int(model.get("total_bytes") or 0)
    if len(listings) < 2:
        for node in listings:
            views.append(_view("model files", node, StepStatus.OK,
                               f"{len(listings[node])} files, {totals[node] / 2**30:.2f} GiB"))
        return views
    ref_node = config.head.name if config.head.name in listings else next(iter(listings))
    ref = listings[ref_node]
    for node, files in listings.items():
        summary = f"{len(files)} files, {totals[node] / 2**30:.2f} GiB"
        if node == ref_node:
            views.append(_view("model files", node, StepStatus.OK, summary))
            continue
        missing = sorted(set(ref) - set(files))
        extra = sorted(set(files) - set(ref))
        sized = sorted(k for k in set(ref) & set(files) if ref[k] != files[k])
        if missing or extra or sized:
            diff = ([f"missing here: {m}" for m in missing[:10]] + [f"only here: {e}" for e in extra[:10]]
                    + [f"size differs: {s} ({files[s]} vs {ref[s]} on {ref_node})" for s in sized[:10]])
            views.append(_view("model files", node, StepStatus.FAILED,
                               f"differs from {ref_node}: {len(missing)} missing, {len(extra)} extra, "
                               f"{len(sized)} of another size ({summary})"
                               + (fix if ref_node == head else ""), diff))
        else:
            views.append(_view("model files", node, StepStatus.OK, summary + f", same as {ref_node}"))
    return views


def check_same(name: str, values: Mapping[str, str | None], what: str, head: str,
               fix: str = "") -> list[StepView]:
    """One value per node (image id, vLLM version) that must be equal everywhere; ``fix`` (a command)
    is offered where a node's value differs from the head's."""
    present = {n: v for n, v in values.items() if v}
    ref = present.get(head) or next(iter(present.values()), None)
    views = []
    for node, value in values.items():
        if not value:
            views.append(_view(name, node, StepStatus.FAILED, f"{what} unknown"))
        elif value != ref:
            offer = f": `{fix}` copies the head's" if fix and ref == present.get(head) else ""
            views.append(_view(name, node, StepStatus.FAILED,
                               f"{what} {value} differs from {ref} on {head}{offer}"))
        else:
            views.append(_view(name, node, StepStatus.OK, f"{what} {value}"))
    return views


@dataclass
class PreflightSummary:
    views: list[StepView] = field(default_factory=list)
    vllm_version: str | None = None

    @property
    def failed(self) -> list[StepView]:
        return [v for v in self.views if v.status is StepStatus.FAILED]

    @property
    def ok(self) -> bool:
        return not self.failed

    def message(self) -> str:
        if self.ok:
            warn = [v for v in self.views if v.status is StepStatus.WARNING]
            return "preflight passed" + (f" with {len(warn)} warning(s)" if warn else "")
        first = self.failed[0]
        where = f"{first.node}: " if first.node else ""
        more = f" (+{len(self.failed) - 1} more)" if len(self.failed) > 1 else ""
        return f"preflight failed: {where}{first.name}: {first.message}{more}"


def check_recipe_vllm(config: SparkConfig, vllm_version: str | None) -> StepView | None:
    """The image's vLLM against the recipe's ``min_vllm`` (None when there is nothing to say)."""
    rid = config.engine.recipe
    found = find_recipe(rid) if rid else None
    if found is None or not found.recipe.min_vllm:
        return None
    need = found.recipe.min_vllm
    if vllm_version is None:
        return StepView(name="recipe", node=config.head.name, status=StepStatus.WARNING,
                        message=f"recipe {rid} needs vLLM ≥ {need}; this vLLM's version is unknown")
    if version_key(vllm_version) < version_key(need):
        return StepView(name="recipe", node=config.head.name, status=StepStatus.FAILED,
                        message=f"recipe {rid} needs vLLM ≥ {need}, the image has {vllm_version}: "
                        "use a newer image")
    return StepView(name="recipe", node=config.head.name, status=StepStatus.OK,
                    message=f"recipe {rid}: vLLM {vllm_version} ≥ {need}")
