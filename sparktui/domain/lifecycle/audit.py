"""The nodes compared (``sparktui audit`` and preflight): what one node would run with that another would not.

Cross-node drift hangs or slows a start with nothing in the log that names it: a model file or a
bind-mounted file that differs on one node, an environment variable (``PYTHONHASHSEED``, ``NCCL_*``) set
on one side only, a pip ``nvidia-nccl-cu*`` library on one node and the system's on the other, an address
advertised that is not the cable's. ``AUDIT_PY`` (``sparktui/node/audit.py``) gathers each node's facts in
one round trip (docker: a second, in a throw-away container of the image, for the engine's own world);
``compare`` words every difference with the node it is on. Pure.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.config import NodeConfig, SparkConfig
from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle.plan import runtimes
from sparktui.domain.lifecycle.preflight import model_hf_home, model_host_path
from sparktui.domain.lifecycle.ready_timeout import ENV as READY_TIMEOUT_ENV
from sparktui.node import source

#: ``sparktui/node/audit.py`` (its argv and output are said there).
AUDIT_PY = source("audit")

#: The engine's environment compared: these names, and every name with these prefixes (the variables
#: that change what NCCL, Gloo, UCX, CUDA, vLLM, the HF hub and Python's hashing do, and which libnccl loads).
ENV_NAMES = ("PYTHONHASHSEED", "LD_LIBRARY_PATH", "LD_PRELOAD")
ENV_PREFIXES = ("NCCL_", "GLOO_", "UCX_", "CUDA_", "VLLM_", "HF_", "TORCH_")
#: Files up to this size (and not weight shards) are hashed: config.json, tokenizer files, *.py.
HASH_BOUND = 64 * 1024 * 1024
#: Variables that name the interface NCCL / Gloo open their sockets on.
SOCKET_IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


# ---- the commands ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditCommands:
    """What runs on one node: ``host`` (the node's own files, mounts and addresses; on a host runtime the
    engine's world too) and, with docker, ``engine`` in a throw-away container of the image."""

    host: tuple[str, ...]
    engine: tuple[str, ...] | None = None


#: Runs "$@" under the python3 beside the vllm command ($0, found on PATH), else under the node's Python
#: ($1): a venv's vLLM, its torch and its libnccl are that venv's Python's.
BESIDE_VLLM_SH = ('v=$(command -v "$0" 2>/dev/null); p="${v%/*}/python3"; [ -x "$p" ] || p="$1"; shift; '
                  'exec "$p" "$@"')


def engine_python(config: SparkConfig, node: NodeConfig) -> list[str]:
    """The Python a host-runtime vLLM runs in: ``engine.vllm_command``'s own when it is a Python, else the
    python3 beside the vllm command, else the node's ``python`` (the environment is the one SSH gives the
    engine either way)."""
    first = config.engine.vllm_command[0]
    if first.rsplit("/", 1)[-1].startswith("python"):
        return [first]
    return ["sh", "-c", BESIDE_VLLM_SH, first, node.python]


def mount_sources(config: SparkConfig) -> list[str]:
    """The host side of every bind mount of the engine container (``~`` is the node's home there)."""
    e = config.engine
    if e.runtime != "docker":
        return []
    return list(dict.fromkeys([m.source for m in e.mounts] + [m.source for m in e.cache_mounts]))


def audit_commands(config: SparkConfig, node: NodeConfig) -> AuditCommands:
    e = config.engine
    docker = e.runtime == "docker"
    path = model_host_path(config)
    model: dict[str, Any] = {"path": path} if path else {"hf_id": e.model, "hf_home": model_hf_home(config)}
    engine = {"env_names": list(ENV_NAMES), "env_prefixes": list(ENV_PREFIXES)}
    peers = [n.address for n in config.nodes if n.name != node.name]
    req: dict[str, Any] = {"hash_bound": HASH_BOUND, "model": model, "mounts": mount_sources(config),
                           "net": {"peers": peers}}
    if docker:
        req["image"] = e.image
        inner = A.docker_run_once(e.image, ["python3", "-c", AUDIT_PY, json.dumps({"engine": engine})])
        return AuditCommands((node.python, "-c", AUDIT_PY, json.dumps(req)), tuple(inner))
    req["engine"] = engine
    return AuditCommands((*engine_python(config, node), "-c", AUDIT_PY, json.dumps(req)))


# ---- one node's facts ------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeAudit:
    hostname: str | None = None
    #: Relative path → (size, SHA-256 or None when not hashed).
    files: Mapping[str, tuple[int, str | None]] = field(default_factory=dict)
    model_path: str | None = None
    model_exists: bool | None = None
    mounts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    env: Mapping[str, str] | None = None
    vllm: str | None = None
    nccl: Mapping[str, Any] | None = None
    interfaces: Mapping[str, str | None] = field(default_factory=dict)
    cable: tuple[str, ...] = ()
    routes: Mapping[str, str | None] = field(default_factory=dict)
    image_id: str | None = None

    @classmethod
    def parse(cls, host_text: str, engine_text: str | None = None) -> NodeAudit:
        """The node's report (and, with docker, the image's); ValueError when there is none."""
        data = last_json_object(host_text)
        if data is None:
            raise ValueError("no JSON report in the node's output")
        if engine_text is not None:
            inner = last_json_object(engine_text)
            if inner is None or "engine" not in inner:
                raise ValueError("no JSON report from the image")
            data["engine"] = inner["engine"]
        model = data.get("model") or {}
        engine = data.get("engine")
        net = data.get("net") or {}
        return cls(
            hostname=data.get("hostname"),
            files={str(f[0]): (int(f[1]), f[2]) for f in model.get("files") or ()},
            model_path=model.get("path"), model_exists=model.get("exists"),
            mounts=dict(data.get("mounts") or {}),
            env=dict(engine.get("env") or {}) if isinstance(engine, dict) else None,
            vllm=engine.get("vllm") if isinstance(engine, dict) else None,
            nccl=engine.get("nccl") if isinstance(engine, dict) else None,
            interfaces=dict(net.get("interfaces") or {}), cable=tuple(net.get("cable") or ()),
            routes=dict(net.get("routes") or {}), image_id=data.get("image_id"),
        )


# ---- the comparison --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Difference:
    #: "facts", "image", "vLLM", "model", "mount", "env", "nccl" or "address".
    topic: str
    #: The node it is on (the one that differs from the reference node).
    node: str
    message: str
    #: A start would hang or fail on it (preflight fails it; the rest are warnings).
    blocking: bool = False
    #: For a model file: "hash" (same size, other content), "size", "missing", "extra" or "dir".
    kind: str = ""


_D = Difference


def _short(digest: str | None) -> str:
    return (digest or "?")[:8] + "…"


def _reference(config: SparkConfig, audits: Mapping[str, NodeAudit]) -> str:
    return config.head.name if config.head.name in audits else next(iter(audits))


def _model_differences(ref: str, audits: Mapping[str, NodeAudit]) -> list[Difference]:
    out: list[Difference] = []
    base = audits[ref]
    for node, got in audits.items():
        if node == ref:
            continue
        if got.model_exists is False and base.model_exists:
            out.append(_D("model", node, f"model directory {got.model_path} missing on {node} "
                                         f"(present on {ref})", blocking=True, kind="dir"))
            continue
        for name in sorted(set(base.files) | set(got.files)):
            mine, theirs = got.files.get(name), base.files.get(name)
            if mine is None and theirs is not None:
                out.append(_D("model", node, f"{name} missing on {node} ({theirs[0]:,} bytes on {ref})",
                              kind="missing"))
            elif theirs is None and mine is not None:
                out.append(_D("model", node, f"{name} on {node} only ({mine[0]:,} bytes)", kind="extra"))
            elif mine is not None and theirs is not None:
                if mine[0] != theirs[0]:
                    out.append(_D("model", node, f"{name} differs on {node} (size {mine[0]:,} vs "
                                                 f"{theirs[0]:,} bytes on {ref})", kind="size"))
                elif mine[1] and theirs[1] and mine[1] != theirs[1]:
                    out.append(_D("model", node, f"{name} differs on {node} (sha256 {_short(mine[1])} "
                                                 f"vs {_short(theirs[1])} on {ref})", kind="hash"))
    return out


def _mount_differences(config: SparkConfig, ref: str, audits: Mapping[str, NodeAudit]) -> list[Difference]:
    """A source missing where another node has it (docker would mount an empty directory in its place),
    or a file that differs. A cache mount's directory may be missing (docker creates it; the first start
    fills it), and one missing on every node is the config's matter, not drift."""
    out: list[Difference] = []
    caches = {m.source for m in config.engine.cache_mounts}
    for path in sorted({p for a in audits.values() for p in a.mounts}):
        present = [n for n, a in audits.items() if (a.mounts.get(path) or {}).get("kind") not in
                   (None, "missing")]
        for node, got in audits.items():
            mine = got.mounts.get(path) or {"kind": "missing"}
            if mine.get("kind") == "missing":
                if present and path not in caches:
                    out.append(_D("mount", node, f"mount source {path} missing on {node} (present on "
                                                 f"{', '.join(present)})"))
                continue
            if node == ref:
                continue
            theirs = audits[ref].mounts.get(path) or {}
            if theirs.get("kind") in (None, "missing"):
                continue
            if mine.get("kind") != theirs.get("kind"):
                out.append(_D("mount", node, f"mount source {path} is a {mine.get('kind')} on {node}, "
                                             f"a {theirs.get('kind')} on {ref}"))
            elif mine.get("kind") == "file" and mine.get("size") != theirs.get("size"):
                out.append(_D("mount", node, f"mount source {path} differs on {node} (size "
                                             f"{mine.get('size'):,} vs {theirs.get('size'):,} bytes "
                                             f"on {ref})"))
            elif mine.get("sha256") and theirs.get("sha256") and mine["sha256"] != theirs["sha256"]:
                out.append(_D("mount", node, f"mount source {path} differs on {node} (sha256 "
                                             f"{_short(mine['sha256'])} vs {_short(theirs['sha256'])} "
                                             f"on {ref})"))
    return out


def _env_differences(config: SparkConfig, ref: str, audits: Mapping[str, NodeAudit]) -> list[Difference]:
    """The node's own variables: the config's (``engine.env``, the addresses, the tag) are set alike on
    every node by the start and override them, so they are left out (the ready timeout's too)."""
    ours = {*runtimes(config)[ref].env, READY_TIMEOUT_ENV}
    envs = {n: {k: v for k, v in a.env.items() if k not in ours}
            for n, a in audits.items() if a.env is not None}
    if ref not in envs or len(envs) < 2:
        return []
    out: list[Difference] = []
    for var in sorted({k for env in envs.values() for k in env}):
        holders = [n for n, env in envs.items() if var in env]
        lacking = [n for n in envs if var not in envs[n]]
        if lacking:
            values = sorted({envs[n][var] for n in holders})
            shown = ", ".join(f"={v}" for v in values)
            odd = lacking[0] if ref in holders else holders[0]
            out.append(_D("env", odd, f"{var} set on {', '.join(holders)} only ({shown})"))
            continue
        for node, env in envs.items():
            if node != ref and env[var] != envs[ref][var]:
                out.append(_D("env", node, f"{var} differs on {node} (={env[var]} vs ={envs[ref][var]} "
                                           f"on {ref})"))
    return out


def nccl_text(nccl: Mapping[str, Any] | None) -> str:
    """Which libnccl loads, and why: "/…/libnccl.so.2 (pip nvidia-nccl-cu12 2.21.5)"."""
    if not nccl:
        return "unknown"
    loads = nccl.get("loads")
    if not loads:
        return "no libnccl found"
    if loads == nccl.get("override"):
        return f"{loads} (VLLM_NCCL_SO_PATH or LD_PRELOAD)"
    if loads == nccl.get("pip"):
        return f"{loads} (pip {nccl.get('pip_version') or 'wheel'})"
    return f"{loads} (system)"


def _nccl_differences(ref: str, audits: Mapping[str, NodeAudit]) -> list[Difference]:
    base = audits[ref]
    if base.nccl is None:
        return []
    out = []
    for node, got in audits.items():
        if node != ref and got.nccl is not None and nccl_text(got.nccl) != nccl_text(base.nccl):
            out.append(_D("nccl", node, f"libnccl differs on {node}: {nccl_text(got.nccl)} vs "
                                        f"{nccl_text(base.nccl)} on {ref}"))
    return out


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def ifname_matches(spec: str, names: Sequence[str]) -> list[str]:
    """The interfaces NCCL's ``*_SOCKET_IFNAME`` syntax selects: a comma list of prefixes, ``=`` for an
    exact name, ``^`` to exclude."""
    exclude = spec.startswith("^")
    parts = [p for p in spec.lstrip("^").split(",") if p]
    exact = any(p.startswith("=") for p in parts)
    parts = [p.lstrip("=") for p in parts]

    def hit(name: str) -> bool:
        return any(name == p if exact else name.startswith(p) for p in parts)

    return [n for n in names if hit(n) != exclude]


def _address_differences(config: SparkConfig, audits: Mapping[str, NodeAudit]) -> list[Difference]:
    out: list[Difference] = []
    rts = runtimes(config)
    for node, got in audits.items():
        if not got.interfaces:
            continue
        cfg = config.node(node)
        addr = cfg.address
        holders = [n for n, a in got.interfaces.items() if a == addr]
        cable = [cfg.interface] if cfg.interface else list(got.cable)
        cable_addrs = ", ".join(f"{n}: {got.interfaces.get(n) or 'no address'}" for n in cable)
        if _is_ip(addr) and not holders:
            out.append(_D("address", node, f"{node} advertises {addr} (Ray node IP, VLLM_HOST_IP) but "
                                           f"no interface of {node} holds it", blocking=True))
        elif holders and cable and not set(holders) & set(cable):
            out.append(_D("address", node, f"{node} advertises {addr} on {holders[0]}, not on the cable "
                                           f"({cable_addrs})"))
        for peer, source_addr in got.routes.items():
            if source_addr and _is_ip(addr) and source_addr != addr:
                out.append(_D("address", node, f"{node} reaches {peer} from {source_addr}, not from its "
                                               f"advertised {addr}"))
        env = {**(got.env or {}), **rts[node].env}
        for var in SOCKET_IFNAME_VARS:
            spec = env.get(var)
            if not spec:
                continue
            chosen = ifname_matches(spec, sorted(got.interfaces))
            if not chosen:
                out.append(_D("address", node, f"{var}={spec} selects no interface of {node}",
                              blocking=True))
            elif _is_ip(addr) and addr not in {got.interfaces.get(n) for n in chosen}:
                found = ", ".join(f"{n} ({got.interfaces.get(n) or 'no address'})" for n in chosen)
                out.append(_D("address", node, f"{var}={spec} selects {found} on {node}, not the "
                                               f"advertised {addr}"))
    return out


def _same(topic: str, what: str, values: Mapping[str, str | None], ref: str) -> list[Difference]:
    base = values.get(ref)
    return [Difference(topic, n, f"{what} differs on {n}: {v or 'unknown'} vs {base or 'unknown'} on {ref}")
            for n, v in values.items() if n != ref and v != base]


def compare(config: SparkConfig, found: Mapping[str, NodeAudit | str]) -> list[Difference]:
    """Every difference between the nodes, each named with its node; ``found``: a node's facts or why they
    could not be read (itself a difference: that node is not compared)."""
    out = [Difference("facts", n, f"{n}'s facts unreadable: {why}", blocking=False)
           for n, why in found.items() if isinstance(why, str)]
    # In the config's order, whatever order the nodes answered in.
    audits = {n.name: a for n in config.nodes if isinstance(a := found.get(n.name), NodeAudit)}
    if not audits:
        return out
    ref = _reference(config, audits)
    if config.engine.runtime == "docker":
        out += _same("image", "image ID", {n: a.image_id for n, a in audits.items()}, ref)
    out += _same("vLLM", "vLLM version", {n: a.vllm for n, a in audits.items()}, ref)
    out += _model_differences(ref, audits)
    out += _mount_differences(config, ref, audits)
    out += _env_differences(config, ref, audits)
    out += _nccl_differences(ref, audits)
    out += _address_differences(config, audits)
    return out


# ---- what is shown ---------------------------------------------------------------------------------
def summary_rows(config: SparkConfig,
                 found: Mapping[str, NodeAudit | str]) -> list[tuple[str, dict[str, str]]]:
    """The table: one row per fact, one column per node."""
    def cell(fn: Any) -> dict[str, str]:
        return {n: (fn(a) if isinstance(a, NodeAudit) else "unreadable") for n, a in found.items()}

    def model(a: NodeAudit) -> str:
        if a.model_exists is False:
            return "missing"
        hashed = sum(1 for _, h in a.files.values() if h)
        total = sum(s for s, _ in a.files.values())
        return f"{len(a.files)} files, {total / 1024**3:.1f} GiB, {hashed} hashed"

    rows: list[tuple[str, dict[str, str]]] = [("host", cell(lambda a: a.hostname or "?"))]
    if config.engine.runtime == "docker":
        rows.append(("image ID", cell(lambda a: (a.image_id or "missing").removeprefix("sha256:")[:12])))
    rows.append(("vLLM", cell(lambda a: a.vllm or "unknown")))
    rows.append(("model files", cell(model)))
    if mount_sources(config):
        rows.append(("mounts present", cell(
            lambda a: f"{sum(1 for m in a.mounts.values() if m.get('kind') != 'missing')} "
                      f"of {len(a.mounts)}")))
    rows.append(("engine env vars", cell(lambda a: "unknown" if a.env is None else str(len(a.env)))))
    rows.append(("libnccl", cell(lambda a: nccl_text(a.nccl))))
    def advertised(node: str, a: NodeAudit) -> str:
        addr = config.node(node).address
        where = [i for i, x in a.interfaces.items() if x == addr]
        return f"{addr} on {where[0]}" if where else f"{addr} (on no interface)"

    rows.append(("advertised address", {n: advertised(n, a) if isinstance(a, NodeAudit) else "unreadable"
                                        for n, a in found.items()}))
    return rows


def audit_json(config: SparkConfig, found: Mapping[str, NodeAudit | str],
               differences: Sequence[Difference]) -> dict[str, Any]:
    return {
        "ok": not differences,
        "reference": config.head.name,
        "nodes": {n: ({"hostname": a.hostname, "image_id": a.image_id, "vllm": a.vllm,
                       "model_path": a.model_path, "files": {k: {"size": s, "sha256": h}
                                                             for k, (s, h) in a.files.items()},
                       "mounts": dict(a.mounts), "env": dict(a.env or {}), "nccl": dict(a.nccl or {}),
                       "interfaces": dict(a.interfaces), "cable": list(a.cable), "routes": dict(a.routes)}
                      if isinstance(a, NodeAudit) else {"error": a}) for n, a in found.items()},
        "differences": [{"topic": d.topic, "node": d.node, "message": d.message, "blocking": d.blocking}
                        for d in differences],
    }


def audit_views(config: SparkConfig, found: Mapping[str, NodeAudit | str]) -> list[StepView]:
    """Preflight's rows: one per difference (a failure where a start would hang or fail on it, else a
    warning), or one "the nodes agree" row. Image and vLLM version are preflight's own checks already, and
    so are a local model directory's files and sizes ("model files", which offers `model sync`): here only
    their content."""
    sized = model_host_path(config) is not None

    def own(d: Difference) -> bool:
        return d.topic not in ("image", "vLLM") and not (d.topic == "model" and sized and d.kind != "hash")

    diffs = [d for d in compare(config, found) if own(d)]
    if not diffs:
        return [StepView("nodes alike", config.head.name, StepStatus.OK,
                         message="model files, mounts, engine environment, libnccl and addresses agree")]
    return [StepView(f"nodes alike: {d.topic}", d.node,
                     StepStatus.FAILED if d.blocking else StepStatus.WARNING, message=d.message)
            for d in diffs]
