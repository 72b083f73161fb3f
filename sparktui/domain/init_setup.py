"""`sparktui init`: from what discovery found on each host to a commented, validated config (pure).

``sparktui.remote.init_discovery`` gathers the facts over SSH (the telemetry probe's one sample for
memory, GPU and RDMA ports; HOST_PY for interfaces, addresses, disk; docker; the model scan); this module
judges them the way people set up two Sparks by hand (NVIDIA's playbook, the community launchers):

* the cable: the RDMA ports whose state is ACTIVE are the cable's twins (``rocep1s0f1`` +
  ``roceP2p1s0f1``): all of them go in ``rdma_devices`` / ``NCCL_IB_HCA``; the interface is an active
  port's netdev that has an IPv4 address, preferring the name without a capital ``P`` (``enp1s0f1np1``
  over its twin ``enP2p1s0f1np1``); its address is the node's ``ip``. Without one, the address SSH
  reached the node at (``SSH_CONNECTION``) is the node's address;
* docker: an image whose repository names vLLM, present on every node with the same image ID (newest
  vLLM first); else ``runtime = "host"`` when vLLM is on the hosts;
* the model: the one asked for, else the largest model every node has; a recipe whose ``model`` names it;
  memory sizing proposes ``--gpu-memory-utilization`` and ``--max-model-len`` when no recipe does.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.model_files import ModelDir
from sparktui.domain.recipes import version_key
from sparktui.domain.sizing import GIB, SizingError, propose, shape_from_config
from sparktui.node import source

#: ``sparktui/node/host.py`` and ``reach.py`` (their argv and output are said there).
HOST_PY = source("host")
REACH_PY = source("reach")

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Interface:
    name: str
    operstate: str | None = None
    mtu: int | None = None
    speed: int | None = None
    ipv4: str | None = None
    prefix: int | None = None


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    state: str | None
    netdev: str | None
    rate: str | None = None

    @property
    def active(self) -> bool:
        return (self.state or "").upper() == "ACTIVE"


@dataclass(frozen=True)
class Image:
    ref: str
    id: str
    vllm: str | None = None


@dataclass
class DiscoveredHost:
    """Everything discovered on one host (filled in by the gatherer; empty parts stay empty)."""

    host: str
    reachable: bool = False
    error: str | None = None
    hostname: str = ""
    arch: str = ""
    kernel: str = ""
    home: str = ""
    ssh_address: str | None = None
    interfaces: list[Interface] = field(default_factory=list)
    disk_free: int | None = None
    tools: dict[str, str | None] = field(default_factory=dict)
    mem_total: int | None = None
    mem_available: int | None = None
    gpus: list[str] = field(default_factory=list)
    gpu_source: str | None = None
    rdma: list[RdmaPort] = field(default_factory=list)
    docker: str | None = None
    docker_error: str | None = None
    images: list[Image] = field(default_factory=list)
    host_vllm: str | None = None
    models: list[ModelDir] = field(default_factory=list)
    #: peer node name → "ok" or the reason its cable address could not be reached from here.
    reaches: dict[str, str] = field(default_factory=dict)

    def apply_host_report(self, data: Mapping[str, Any]) -> None:
        self.hostname = str(data.get("hostname") or "")
        self.arch = str(data.get("arch") or "")
        self.kernel = str(data.get("kernel") or "")
        self.home = str(data.get("home") or "")
        conn = str(data.get("ssh_connection") or "").split()
        self.ssh_address = conn[2] if len(conn) >= 3 else None
        self.interfaces = [Interface(str(i.get("name")), i.get("operstate"), _num(i.get("mtu")),
                                     _num(i.get("speed")), i.get("ipv4"), _num(i.get("prefix")))
                           for i in data.get("interfaces") or ()]
        self.disk_free = data.get("disk_free")
        self.tools = dict(data.get("tools") or {})

    def apply_probe_sample(self, sample: Mapping[str, Any]) -> None:
        mem = sample.get("memory") or {}
        self.mem_total, self.mem_available = mem.get("total"), mem.get("available")
        gpu = sample.get("gpu") or {}
        self.gpu_source = gpu.get("source")
        self.gpus = [str(d.get("name") or "GPU") for d in gpu.get("devices") or ()]
        self.rdma = [RdmaPort(str(p.get("device")), int(p.get("port") or 1), p.get("state"), p.get("netdev"),
                              p.get("rate")) for p in sample.get("rdma") or ()]

    def interface(self, name: str | None) -> Interface | None:
        return next((i for i in self.interfaces if i.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host, "reachable": self.reachable, "error": self.error, "hostname": self.hostname,
            "arch": self.arch, "kernel": self.kernel, "home": self.home, "ssh_address": self.ssh_address,
            "memory": {"total": self.mem_total, "available": self.mem_available},
            "gpus": self.gpus, "gpu_source": self.gpu_source,
            "rdma": [vars(p) for p in self.rdma],
            "interfaces": [vars(i) for i in self.interfaces if i.name != "lo"],
            "disk_free": self.disk_free, "docker": self.docker, "docker_error": self.docker_error,
            "images": [vars(i) for i in self.images], "host_vllm": self.host_vllm,
            "models": [{"name": m.name, "path": m.path, "hf_id": m.hf_id, "bytes": m.total_bytes,
                        "weights": m.weights_bytes} for m in self.models],
            "reaches": dict(self.reaches), "cable": vars(choose_cable(self)),
        }


def _num(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Cable:
    #: The cable's netdev (the node's ``interface``: preflight checks its speed and MTU).
    interface: str | None
    ip: str | None
    rdma_devices: tuple[str, ...]
    why: str
    #: The cable has an address of its own (NCCL, Gloo and Ray can all use it).
    addressed: bool = True
    #: Where Gloo, NCCL's bootstrap and UCX open sockets: the interface that holds ``ip``.
    sockets: str | None = None


def choose_cable(h: DiscoveredHost, interface: str | None = None) -> Cable:
    """The node's cable; ``interface`` (the user's pick) wins when this host has it with an address."""
    active = [p for p in h.rdma if p.active]
    devices = tuple(sorted({p.device for p in active}))
    candidates = [p.netdev for p in active if p.netdev]
    # The twin without a capital P first (enp1s0f1np1 before enP2p1s0f1np1), as the community launchers do.
    candidates.sort(key=lambda n: ("P" in n, n))
    picked = h.interface(interface) if interface else None
    if picked is not None and picked.ipv4:
        # The pick carries the address and the sockets; the cable's netdev stays the node's interface.
        return Cable(candidates[0] if candidates else picked.name, picked.ipv4, devices,
                     f"{picked.name} (chosen), address {picked.ipv4}", addressed=picked.name in candidates,
                     sockets=picked.name)
    for name in candidates:
        iface = h.interface(name)
        if iface is not None and iface.ipv4:
            return Cable(name, iface.ipv4, devices, f"{name} carries RDMA ports {', '.join(devices)}, "
                         f"address {iface.ipv4}", sockets=name)
    # No address on the cable: sockets (Gloo, NCCL's bootstrap, Ray) go where SSH came in; naming the
    # cable's netdev there would make Gloo fail ("Unable to find address for: enp1s0f1np1").
    ssh_if = next((i.name for i in h.interfaces if i.ipv4 and i.ipv4 == h.ssh_address), None)
    if candidates:
        return Cable(candidates[0], h.ssh_address, devices,
                     f"the cable's netdevs ({', '.join(candidates)}) have no IPv4 address here: sockets on "
                     f"{ssh_if or '?'}, the address SSH reached ({h.ssh_address})", addressed=False,
                     sockets=ssh_if)
    return Cable(None, h.ssh_address, (), "no RDMA port is ACTIVE: using the address SSH reached "
                 f"({h.ssh_address}); NCCL will use sockets", addressed=False, sockets=ssh_if)


def node_name(h: DiscoveredHost, taken: set[str]) -> str:
    """A name for the node: the SSH alias when it is a plain word, else the short hostname; made safe."""
    base = h.host if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", h.host) else (h.hostname.split(".")[0] or h.host)
    name = _SAFE_NAME.sub("-", base).strip("-") or "node"
    out, i = name, 2
    while out in taken:
        out, i = f"{name}-{i}", i + 1
    taken.add(out)
    return out


#: Images whose repository names one of these are asked for their vLLM version.
VLLM_IMAGE_HINTS = ("vllm",)
#: ``docker images`` format whose lines ``vllm_images`` reads.
DOCKER_IMAGES_FORMAT = "{{.Repository}}:{{.Tag}}\t{{.ID}}"


def vllm_images(text: str) -> list[tuple[str, str]]:
    """(repo:tag, image ID) of the ``docker images --no-trunc --format DOCKER_IMAGES_FORMAT`` lines whose
    repository names vLLM (``nvcr.io/nvidia/vllm``, ``vllm/vllm-openai``, ``eugr/spark-vllm``, …);
    untagged images are left out."""
    out = []
    for line in text.splitlines():
        ref, _, iid = line.strip().partition("\t")
        repo = ref.rpartition(":")[0]
        if iid and "<none>" not in ref and any(k in repo.lower() for k in VLLM_IMAGE_HINTS):
            out.append((ref, iid))
    return out


def ssh_config_hosts(text: str) -> list[str]:
    """The aliases of ``~/.ssh/config`` (``Host`` lines without wildcards or negations)."""
    out: list[str] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and words[0].lower() == "host":
            out += [w for w in words[1:] if not any(c in w for c in "*?!") and w not in out]
    return out


@dataclass
class InitOptions:
    head: str | None = None
    model: str | None = None
    recipe: str | None = None
    image: str | None = None
    runtime: str | None = None
    #: The interface Ray, Gloo and NCCL's sockets use on every node (default: the cable's, see choose_cable).
    interface: str | None = None
    #: SSH settings for every node (None: from ~/.ssh/config).
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    python: str = "python3"
    proc_root: str = "/proc"
    sys_root: str = "/sys"
    floor_gib: float = 4.0
    #: ("engine.vllm_command", value) pairs applied last.
    sets: list[tuple[str, Any]] = field(default_factory=list)


@dataclass
class Proposal:
    data: dict[str, Any]
    #: key path ("engine.image", "nodes[0].ip") → a comment written above it.
    comments: dict[str, str]
    notes: list[str]
    warnings: list[str]


def parse_set(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--set``: VALUE is TOML (``["a", "b"]``, ``2``, ``true``, ``"x"``) or else a
    plain string."""
    key, eq, raw = text.partition("=")
    key = key.strip()
    if not eq or not re.fullmatch(r"(cluster|engine|serving|ui)(\.[A-Za-z_]+)+|nodes\.[A-Za-z_]+", key):
        raise ValueError(f"--set {text!r}: expected SECTION.KEY=VALUE, e.g. engine.runtime=host")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def interface_choices(hosts: Sequence[DiscoveredHost]) -> list[str]:
    """Interfaces with an IPv4 address on every host (what an interactive pick offers), cable first."""
    if not hosts:
        return []
    def addressed(h: DiscoveredHost, name: str) -> bool:
        iface = h.interface(name)
        return iface is not None and bool(iface.ipv4)

    names = [i.name for i in hosts[0].interfaces
             if i.name != "lo" and all(addressed(h, i.name) for h in hosts)]
    cable = {p.netdev for h in hosts for p in h.rdma if p.active}
    return sorted(names, key=lambda n: (n not in cable, "P" in n, n))


def image_choices(hosts: Sequence[DiscoveredHost]) -> list[Image]:
    """Images with vLLM and one image ID on every host, newest vLLM first."""
    if not hosts or any(h.docker is None for h in hosts):
        return []
    same = [i for i in hosts[0].images
            if i.vllm and all(any(o.id == i.id for o in h.images) for h in hosts[1:])]
    return sorted(same, key=lambda i: version_key(i.vllm), reverse=True)


def model_choices(hosts: Sequence[DiscoveredHost]) -> list[ModelDir]:
    """Models on every host with the same size, largest first."""
    if not hosts:
        return []
    same = [m for m in hosts[0].models
            if all(any(o.name == m.name and o.total_bytes == m.total_bytes for o in h.models)
                   for h in hosts[1:])]
    return sorted(same, key=lambda m: -m.weights_bytes)


def find_model(models: Sequence[ModelDir], wanted: str) -> ModelDir | None:
    """The scanned model ``--model`` names: by its name, its path or its Hugging Face id."""
    return next((m for m in models if wanted in (m.name, m.path, m.hf_id)), None)


def _common_model(hosts: Sequence[DiscoveredHost], wanted: str | None) -> tuple[ModelDir | None, str]:
    """The model to serve, with why."""
    if wanted:
        found = find_model(hosts[0].models, wanted) if hosts else None
        if found is not None:
            return found, f"{wanted} (asked for)"
        return None, f"{wanted} (asked for; not in the model scan)"
    if not hosts or not hosts[0].models:
        return None, "no model found under the HF cache or ~/models"
    everywhere = model_choices(hosts)
    if not everywhere:
        return None, "no model is on every node with the same size"
    best = everywhere[0]
    return best, f"the largest model on every node ({best.weights_bytes / GIB:.1f} GiB of weights)"


def _common_image(hosts: Sequence[DiscoveredHost], wanted: str | None) -> tuple[Image | None, str]:
    if not hosts or any(h.docker is None for h in hosts):
        bad = [h.host for h in hosts if h.docker is None]
        return None, f"docker not usable on {', '.join(bad)}"
    if wanted:
        same = [i for i in hosts[0].images
                if i.ref == wanted and all(any(o.id == i.id for o in h.images) for h in hosts[1:])]
    else:
        same = image_choices(hosts)
    if not same:
        return None, (f"image {wanted} is not on every node with one image ID" if wanted
                      else "no image with vLLM has the same image ID on every node")
    best = same[0]
    return best, f"{best.ref} ({best.id[:19]}, vLLM {best.vllm or 'unknown'}) on every node"


def propose_config(hosts: Sequence[DiscoveredHost], opts: InitOptions,
                   recipes: Mapping[str, Any] | None = None) -> Proposal:
    """The config dict for these hosts (validated later by the caller with ``parse_config``).

    ``recipes`` maps recipe id → ``Recipe`` (only ``model`` and the sizing flags are read).
    """
    comments: dict[str, str] = {}
    notes: list[str] = []
    warnings: list[str] = []
    taken: set[str] = set()
    names = [node_name(h, taken) for h in hosts]
    head_i = 0
    if opts.head is not None:
        if opts.head in names:
            head_i = names.index(opts.head)
        elif opts.head in [h.host for h in hosts]:
            head_i = [h.host for h in hosts].index(opts.head)
        else:
            warnings.append(f"--head {opts.head}: not one of {', '.join(names)}; {names[0]} is the head")
    nodes: list[dict[str, Any]] = []
    cables = [choose_cable(h, opts.interface) for h in hosts]
    for i, (h, name, cable) in enumerate(zip(hosts, names, cables, strict=True)):
        node: dict[str, Any] = {"name": name, "host": h.host}
        for key in ("user", "port", "identity_file", "known_hosts"):
            if getattr(opts, key) is not None:
                node[key] = getattr(opts, key)
        node["role"] = "head" if i == head_i else "worker"
        if cable.interface and cable.addressed:
            # The cable's own netdev (preflight checks its speed and MTU). A cable without an address
            # leaves it to the RDMA devices; the sockets' interface goes in the env below either way.
            node["interface"] = cable.interface
        if cable.rdma_devices:
            node["rdma_devices"] = list(cable.rdma_devices)
        if cable.ip:
            node["ip"] = cable.ip
        if opts.python != "python3":
            node["python"] = opts.python
        if opts.proc_root != "/proc":
            node["proc_root"] = opts.proc_root
        if opts.sys_root != "/sys":
            node["sys_root"] = opts.sys_root
        mem = (f"{h.mem_available / GIB:.1f} of {h.mem_total / GIB:.1f} GiB free"
               if h.mem_total and h.mem_available is not None else "memory unknown")
        gpu = ", ".join(h.gpus) or f"no GPU seen ({h.gpu_source or 'none'})"
        disk = f", {h.disk_free / 1e9:.0f} GB free disk" if h.disk_free is not None else ""
        comments[f"nodes[{i}]"] = (f"{h.hostname or h.host} ({h.arch or '?'}, {gpu}, {mem}{disk}); "
                                   f"cable: {cable.why}")
        if cable.rdma_devices and not cable.addressed:
            warnings.append(f"{name}: the cable's netdevs have no IPv4 address: give each an address "
                            "(NVIDIA's netplan: 192.168.100.10/24 on the head, .11 on the worker) for NCCL "
                            "over RoCE, then run init again")
        for peer, verdict in sorted(h.reaches.items()):
            if verdict != "ok":
                warnings.append(f"{name} cannot reach {peer} over the cable: {verdict}")
        nodes.append(node)
    if not any(p.active for h in hosts for p in h.rdma):
        warnings.append("no ACTIVE RDMA port on any node: check the QSFP cable (`ibdev2netdev`)")

    engine: dict[str, Any] = {}
    image, why_image = _common_image(hosts, opts.image)
    runtime = opts.runtime
    if runtime is None:
        runtime = "docker" if image is not None else ("host" if all(h.host_vllm for h in hosts) else "docker")
    engine["runtime"] = runtime
    if runtime == "docker":
        if image is not None:
            engine["image"] = image.ref
            comments["engine.image"] = why_image
        else:
            warnings.append(f"no usable vLLM image: {why_image}; set engine.image and `docker pull` it on "
                            "every node")
    elif hosts and all(h.host_vllm for h in hosts):
        comments["engine.runtime"] = "vLLM on the hosts: " + ", ".join(
            f"{h.host} {h.host_vllm}" for h in hosts)

    model, why_model = _common_model(hosts, opts.model)
    recipe_id = opts.recipe
    recipe = recipes.get(recipe_id) if recipes and recipe_id else None
    if recipes and recipe_id is None and model is not None:
        for rid, r in sorted(recipes.items()):
            if r.model and r.model.rsplit("/", 1)[-1].lower() == model.name.rsplit("/", 1)[-1].lower():
                recipe_id, recipe = rid, r
                break
    if recipe_id:
        engine["recipe"] = recipe_id
        comments["engine.recipe"] = "known-good settings for this model (`sparktui recipes " \
            f"{recipe_id}`); keys set below win"
    if model is not None:
        engine["model"], mounts = _model_path(model, runtime, hosts[head_i] if hosts else None)
        if mounts:
            engine["mounts"] = mounts
        comments["engine.model"] = why_model
    elif opts.model:
        engine["model"] = opts.model
        comments["engine.model"] = why_model
    else:
        warnings.append(f"no model chosen: {why_model}; set engine.model")
    engine["tensor_parallel_size"] = len(hosts)
    comments["engine.tensor_parallel_size"] = "one GPU per node"
    sizing_flags = _proposed_flags(hosts, model, recipe, opts, notes, warnings)
    if sizing_flags:
        engine["extra_args"] = sizing_flags
        comments["engine.extra_args"] = notes[-1] if notes else "proposed by memory sizing"
    head_cable = cables[head_i] if cables else None
    env: dict[str, str] = {}
    if head_cable is not None and head_cable.sockets:
        for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "UCX_NET_DEVICES", "TP_SOCKET_IFNAME",
                    "OMPI_MCA_btl_tcp_if_include"):
            env[var] = head_cable.sockets
    if head_cable is not None and head_cable.rdma_devices:
        env["NCCL_IB_HCA"] = ",".join(head_cable.rdma_devices)
    env["RAY_memory_monitor_refresh_ms"] = "0"
    engine["env"] = env
    comments["engine.env"] = "NVIDIA's playbook block: NCCL, Gloo, UCX and MPI on the cable"
    data: dict[str, Any] = {"cluster": {"name": "sparks"}, "nodes": nodes, "engine": engine}
    for key, value in opts.sets:
        _apply_set(data, key, value)
        comments.setdefault(key, "set by --set")
    return Proposal(data, comments, notes, warnings)


def _model_path(model: ModelDir, runtime: str,
                head: DiscoveredHost | None) -> tuple[str, list[dict[str, Any]]]:
    """``engine.model`` (and mounts for docker) for a model found at ``model.path`` on the nodes."""
    home = head.home if head is not None else ""
    if runtime != "docker":
        return (model.hf_id or model.path), []
    if model.hf_id:
        hf = model.path.split("/hub/", 1)[0] if "/hub/" in model.path else f"{home}/.cache/huggingface"
        return model.hf_id, [{"source": _tilde(hf, home), "target": "/root/.cache/huggingface",
                              "read_only": False}]
    parent, _, leaf = model.path.rstrip("/").rpartition("/")
    return f"/models/{leaf}", [{"source": _tilde(parent, home), "target": "/models", "read_only": True}]


def _tilde(path: str, home: str) -> str:
    return "~" + path[len(home):] if home and (path == home or path.startswith(home + "/")) else path


def _proposed_flags(hosts: Sequence[DiscoveredHost], model: ModelDir | None, recipe: Any, opts: InitOptions,
                    notes: list[str], warnings: list[str]) -> list[str]:
    if model is None or model.config is None:
        return []
    try:
        shape = shape_from_config(model.config)
    except SizingError as exc:
        notes.append(f"memory sizing skipped: {exc}")
        return []
    mem = {h.host: (h.mem_total, h.mem_available) for h in hosts if h.mem_total and h.mem_available}
    if len(mem) < len(hosts):
        return []
    p = propose(shape, model.weights_bytes, {k: (int(t), int(a)) for k, (t, a) in mem.items()},
                tp=len(hosts), floor_bytes=int(opts.floor_gib * GIB))
    if p is None:
        warnings.append(f"{model.name} does not fit {len(hosts)} node(s) at any --gpu-memory-utilization "
                        "that keeps the memory floor")
        return []
    if recipe is not None and (recipe.gpu_memory_utilization or recipe.max_model_len):
        notes.append(f"memory sizing would propose {' '.join(p.flags())} ({p.why}); the recipe's values are "
                     "kept: preflight checks them")
        return []
    notes.append(f"proposed by memory sizing: {p.why}")
    return p.flags()


def _apply_set(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    if parts[0] == "nodes":
        for node in data["nodes"]:
            node[parts[1]] = value
        return
    target = data
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value


# ---- TOML with comments --------------------------------------------------------------------------
def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _comment(text: str, out: list[str]) -> None:
    for line in text.splitlines():
        out.append(f"# {line}" if line else "#")


def render_toml(data: Mapping[str, Any], comments: Mapping[str, str], header: str = "") -> str:
    """The config as TOML text, each table and key preceded by its comment (in the schema's order)."""
    out: list[str] = []
    if header:
        _comment(header, out)
        out.append("")

    def table(name: str, body: Mapping[str, Any], path: str) -> None:
        if path in comments:
            _comment(comments[path], out)
        out.append(f"[{name}]")
        subtables: list[tuple[str, Any]] = []
        for key, value in body.items():
            if isinstance(value, Mapping):
                subtables.append((key, value))
                continue
            if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
                subtables.append((key, value))
                continue
            if f"{path}.{key}" in comments:
                _comment(comments[f"{path}.{key}"], out)
            out.append(f"{_toml_key(key)} = {_toml_value(value)}")
        out.append("")
        for key, value in subtables:
            if isinstance(value, Mapping):
                table(f"{name}.{key}", value, f"{path}.{key}")
            else:
                for item in value:
                    if f"{path}.{key}" in comments:
                        _comment(comments[f"{path}.{key}"], out)
                    out.append(f"[[{name}.{key}]]")
                    out.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in item.items())
                    out.append("")

    for section, body in data.items():
        if section == "nodes":
            for i, node in enumerate(body):
                if f"nodes[{i}]" in comments:
                    _comment(comments[f"nodes[{i}]"], out)
                out.append("[[nodes]]")
                out += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in node.items()]
                out.append("")
        elif isinstance(body, Mapping):
            table(section, body, section)
    return "\n".join(out).rstrip() + "\n"


__all__ = ["HOST_PY", "REACH_PY", "Cable", "DiscoveredHost", "Image", "InitOptions", "Interface", "Proposal",
           "RdmaPort", "choose_cable", "node_name", "parse_set", "propose_config", "render_toml",
           "ssh_config_hosts"]
