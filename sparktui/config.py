"""The config.toml schema, its lookup order, and error messages that name file, key and fault.

Validation is pydantic's (strict models, unknown keys forbidden) so a typo never passes silently.
This module is domain code: it imports neither textual nor asyncssh.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import tomllib
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ByteSize, ConfigDict, Field, ValidationError, field_validator, model_validator

# ConfigError and ConfigProblem are imported from here by every caller of the config.
from sparktui.domain.config_faults import ConfigError, ConfigProblem, config_problem, key_path
from sparktui.domain.keys import key_problems
from sparktui.domain.parallel_fit import parallel_fit_fault
from sparktui.domain.recipes import apply_recipe

Port = Annotated[int, Field(ge=1, le=65535)]
NonEmpty = Annotated[str, Field(min_length=1)]

#: What Docker accepts in a container name (``[a-zA-Z0-9][a-zA-Z0-9_.-]+``); our names start with the prefix.
_DOCKER_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
#: One label of a DNS host name (RFC 1123).
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)\Z")


def _is_host_name(text: str) -> bool:
    labels = text.removesuffix(".").split(".")
    return len(text) <= 253 and all(_HOST_LABEL.match(label) for label in labels)


def _resolves(name: str) -> bool:
    try:
        return bool(socket.getaddrinfo(name, None))
    except (OSError, UnicodeError):
        return False


class _Model(BaseModel):
    # frozen: the config is read once and shared by every task; nobody may change it under another's feet.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ClusterConfig(_Model):
    name: NonEmpty = "spark-cluster"
    #: Set in the shipped example; a config found by the default lookup with this set starts the demo instead.
    example: bool = False


class NodeConfig(_Model):
    """One DGX Spark (or a test host)."""

    name: NonEmpty
    #: An address or an ``~/.ssh/config`` alias; ``localhost`` with ``local = true`` runs commands here.
    host: NonEmpty
    user: str | None = None
    port: Port | None = None
    identity_file: str | None = None
    #: A known_hosts file of its own (in addition to ``~/.ssh/known_hosts``); host keys are always checked.
    known_hosts: str | None = None
    role: Literal["head", "worker"] = "worker"
    #: Run commands on this machine without SSH.
    local: bool = False
    #: The high-speed interface (e.g. ``enp1s0f1np1``); auto-detected when empty.
    interface: str | None = None
    #: RDMA devices of the cable (e.g. ``["rocep1s0f1", "roceP2p1s0f1"]``); auto-detected when empty.
    rdma_devices: tuple[NonEmpty, ...] = Field(default=(), strict=False)
    #: The address other nodes and Ray use for this node (the cable's IP); defaults to ``host``.
    ip: str | None = None
    #: GPUs this node gives the engine (a DGX Spark has one GB10): TP × PP may not exceed the nodes' sum.
    gpus: Annotated[int, Field(ge=1)] = 1
    #: Python used on the node to run the telemetry probe.
    python: NonEmpty = "python3"
    #: Where the probe reads /proc and /sys (fixtures in the test bed; "/" on a real node).
    proc_root: NonEmpty = "/proc"
    sys_root: NonEmpty = "/sys"

    @field_validator("name")
    @classmethod
    def _printable_name(cls, value: str) -> str:
        # Any printable text (an FQDN, a space): the UI derives its widget ids from it safely.
        if not value.strip():
            raise ValueError("a node name must not be blank")
        if not value.isprintable():
            raise ValueError("a node name must be printable text")
        return value

    @field_validator("ip")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        # Ray's node IP, VLLM_HOST_IP and MASTER_ADDR: an address, never something a shell would split.
        if value is None:
            return None
        try:
            ipaddress.ip_address(value)
        except ValueError:
            pass
        else:
            return value
        if not _is_host_name(value):
            raise ValueError("not an IP address or a host name")
        if not _resolves(value):
            raise ValueError("not an IP address, and the host name does not resolve here")
        return value

    @property
    def address(self) -> str:
        return self.ip or self.host


class Mount(_Model):
    source: NonEmpty
    target: NonEmpty
    read_only: bool = True


class CacheMount(Mount):
    """A cache directory on the node's disk, mounted writable unless told otherwise."""

    read_only: bool = False


#: vLLM's caches as they lie in a root container (NGC and vllm-openai images run as root): the cache root
#: (``VLLM_CACHE_ROOT``, default ``~/.cache/vllm``: ``torch_compile_cache`` with the compiled graphs and
#: Inductor's artifacts), Triton's kernels (``~/.triton``) and FlashInfer's JIT (``~/.cache/flashinfer``).
#: Kept on the node's disk at the paths a host-installed vLLM uses, so a start after ``docker rm -f``
#: loads its compiled graphs instead of compiling again.
DEFAULT_CACHE_MOUNTS: tuple[CacheMount, ...] = (
    CacheMount(source="~/.cache/vllm", target="/root/.cache/vllm"),
    CacheMount(source="~/.triton", target="/root/.triton"),
    CacheMount(source="~/.cache/flashinfer", target="/root/.cache/flashinfer"),
)


class EngineConfig(_Model):
    #: A recipe id (``sparktui recipes`` lists them): its settings are merged under this table, whose
    #: explicit keys win (``sparktui.domain.recipes``).
    recipe: str | None = None
    runtime: Literal["docker", "host"] = "docker"
    image: str = "nvcr.io/nvidia/vllm:25.11-py3"
    #: Prefix of every container and process name sparktui creates, so it finds (and only stops) its own.
    name_prefix: NonEmpty = "sparktui"
    model: NonEmpty
    served_model_name: str | None = None
    tensor_parallel_size: Annotated[int, Field(ge=1)] = 2
    pipeline_parallel_size: Annotated[int, Field(ge=1)] = 1
    executor: Literal["ray", "mp"] = "ray"
    extra_args: tuple[str, ...] = Field(default=(), strict=False)
    env: dict[str, str] = Field(default_factory=dict)
    mounts: tuple[Mount, ...] = Field(default=(), strict=False)
    #: docker: vLLM's compile caches on the node's disk (``[]``: none, every start compiles afresh).
    cache_mounts: tuple[CacheMount, ...] = Field(default=DEFAULT_CACHE_MOUNTS, strict=False)
    #: ``restart``: ``full`` = stop + start; ``vllm`` = only vLLM, keeping Ray and the containers when they
    #: are healthy (every node and GPU in Ray), else a full restart, saying why.
    restart: Literal["full", "vllm"] = "full"
    api_port: Port = 8000
    ray_port: Port = 6379
    #: Rendezvous port of vLLM's own multi-node mode (``executor = "mp"``).
    master_port: Port = 29501
    shm_size: NonEmpty = "10.24g"
    #: Directory on the head that holds the engine's log and pid files (``~`` is the remote user's home).
    state_dir: NonEmpty = "~/.local/state/sparktui"
    #: How vLLM and Ray are invoked (inside the container for ``docker``, on the node for ``host``).
    vllm_command: tuple[NonEmpty, ...] = Field(default=("vllm",), min_length=1, strict=False)
    ray_command: tuple[NonEmpty, ...] = Field(default=("ray",), min_length=1, strict=False)
    #: Seconds to wait for Ray to report every node and GPU.
    ray_wait_timeout: Annotated[float, Field(gt=0, strict=False)] = 120.0
    #: Each run's vLLM log is kept in ``state_dir`` (``vllm-<start UTC>.log``): at most this many runs (the
    #: current one included) and ``keep_logs_mb`` MiB of earlier runs' logs (the newest one always stays).
    keep_logs: Annotated[int, Field(ge=1, strict=False)] = 10
    keep_logs_mb: Annotated[float, Field(gt=0, strict=False)] = 500.0
    #: Seconds between SIGINT, SIGTERM and SIGKILL when stopping vLLM.
    stop_grace: Annotated[float, Field(gt=0, strict=False)] = 10.0
    #: Seconds a start waits for a node's SSH link that dropped while one of its steps ran (a brief
    #: cable or switch hiccup is ridden out); longer, and the start fails naming the node and its link.
    link_grace_s: Annotated[float, Field(gt=0, strict=False)] = 30.0
    #: Extra ``ray start`` arguments on every node (e.g. ``--num-gpus 1`` on hosts without NVML,
    #: ``--include-dashboard=false``, ``--temp-dir``).
    ray_start_args: tuple[str, ...] = Field(default=(), strict=False)
    #: The Python that has Ray (inside the container for ``docker``); runs the cluster-state probe.
    ray_python: tuple[NonEmpty, ...] = Field(default=("python3",), min_length=1, strict=False)
    #: Memory guard: vLLM is stopped when MemAvailable on any node falls below this while starting or
    #: serving ("4GiB", "512MiB" or bytes; 0 turns the floor off).
    memory_floor: ByteSize = ByteSize(4 * 1024**3)
    #: Memory guard: vLLM is stopped when PSI memory ``full avg10`` (% of time every task stalled on
    #: memory) reaches this on any node; 0 turns it off.
    memory_psi_full: Annotated[float, Field(ge=0, le=100, strict=False)] = 20.0
    #: ``ray start --object-store-memory`` (Ray's own default takes ~30 % of unified memory); 0 leaves
    #: it to Ray. An ``--object-store-memory`` in ``ray_start_args`` wins.
    ray_object_store_memory: ByteSize = ByteSize(4 * 1024**3)
    #: Lists the GPUs the engine's world sees (in the image for docker): preflight counts them per node.
    gpu_list_command: tuple[NonEmpty, ...] = Field(default=("nvidia-smi", "-L"), min_length=1, strict=False)
    #: Free the page cache (``echo 3 > /proc/sys/vm/drop_caches``) on every node before a start.
    drop_caches: bool = False
    #: Extra options for the head's own ``ssh`` to the other nodes when ``sparktui model sync`` runs rsync
    #: there (e.g. ``["-i", "~/.ssh/spark_ed25519"]``); batch mode and host-key checking are always on.
    sync_ssh_options: tuple[NonEmpty, ...] = Field(default=(), strict=False)

    @field_validator("name_prefix")
    @classmethod
    def _docker_token(cls, value: str) -> str:
        if not _DOCKER_TOKEN.match(value):
            raise ValueError("must be a Docker-name-safe token: letters, digits, '_', '.', '-', "
                             "starting with a letter or digit")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not key or not (key[0].isalpha() or key[0] == "_") or not all(
                c.isalnum() or c == "_" for c in key
            ):
                raise ValueError(f"{key!r} is not a valid environment variable name")
        return value


class ServingConfig(_Model):
    #: ``/health`` failing this long after ready means the engine crashed.
    health_fail_seconds: Annotated[float, Field(gt=0, strict=False)] = 15.0
    auto_restart: bool = False
    auto_restart_limit: Annotated[int, Field(ge=0)] = 3
    #: Requests running or waiting while no token is generated this long: the engine is wedged.
    wedge_seconds: Annotated[float, Field(gt=0, strict=False)] = 60.0
    #: GPU power below this at high util while tokens are frozen: stuck (GB10 idles near 16-27 W).
    wedge_power_w: Annotated[float, Field(ge=0, strict=False)] = 30.0
    smoke_prompt: NonEmpty = "Say hello in five words."
    smoke_max_tokens: Annotated[int, Field(ge=1)] = 32
    #: "Serving slower than it should" (sparktui.domain.serving_pace): output tok/s below this share of the
    #: last benchmark's (same model, image, flags) at comparable load, for ``slow_seconds``; or speculative
    #: decoding's acceptance below ``1 - acceptance_drop`` of its level over the first
    #: ``acceptance_early_seconds`` of drafting, for as long.
    slow_ratio: Annotated[float, Field(gt=0, lt=1, strict=False)] = 0.8
    slow_seconds: Annotated[float, Field(gt=0, strict=False)] = 300.0
    acceptance_drop: Annotated[float, Field(gt=0, lt=1, strict=False)] = 1.0 / 3.0
    acceptance_early_seconds: Annotated[float, Field(gt=0, strict=False)] = 120.0


class UIConfig(_Model):
    refresh_interval: Annotated[float, Field(gt=0, le=60, strict=False)] = 1.0
    log_buffer_lines: Annotated[int, Field(ge=100, le=5_000_000)] = 20_000
    readonly: bool = False
    theme: str = "textual-dark"
    #: Binding id → keys, e.g. ``start = "s"`` or ``stop = "x,ctrl+x"``.
    keys: dict[str, str] = Field(default_factory=dict)
    #: Where screenshots and saved logs go; empty = the local state directory (``~/.local/state/sparktui``).
    screenshot_dir: str = ""

    @field_validator("keys")
    @classmethod
    def _keys_apart(cls, value: dict[str, str]) -> dict[str, str]:
        # parse_config reports these per key path (ui.keys.stop); this catches a UIConfig built in code.
        problems = key_problems(value)
        if problems:
            raise ValueError("; ".join(f"{action}: {fault}" for action, fault in problems.items()))
        return value


class SuperviseConfig(_Model):
    """``sparktui supervise``: how it keeps the engine serving when nobody watches."""

    #: More automatic starts and restarts than this within ``window`` seconds: it stops trying ("given up")
    #: and says so, until a person starts the engine again.
    max_restarts: Annotated[int, Field(ge=0)] = 5
    window: Annotated[float, Field(gt=0, strict=False)] = 3600.0
    #: A worker lost after ready (Ray, its link, the head's reach): wait this long for it, then restart all.
    worker_grace: Annotated[float, Field(ge=0, strict=False)] = 60.0
    #: Out of memory (at start, or the memory guard's stop): this many retries, then "needs a person".
    oom_retries: Annotated[int, Field(ge=0)] = 1
    #: A stopped engine whose desired state is serving is started after this long (another sparktui's
    #: operation may be under way; a person's stop makes the desired state "stopped" at once).
    start_delay: Annotated[float, Field(ge=0, strict=False)] = 10.0


class IncidentsConfig(_Model):
    """``[incidents]``: the evidence kept for each failure (``sparktui incidents``; the supervisor takes one
    before it acts). The oldest incidents are removed when either bound is passed."""

    #: At most this many incidents are kept.
    keep: Annotated[int, Field(ge=1)] = 50
    #: ... and at most this much evidence in all (bytes, or "200MiB").
    max_size: ByteSize = ByteSize(200 * 1024 * 1024)
    #: Lines kept of the head's vLLM log and of each Ray worker log.
    log_lines: Annotated[int, Field(ge=10, le=100_000)] = 500
    #: Seconds each node has to give its evidence; a node that does not is recorded as such.
    node_timeout: Annotated[float, Field(gt=0, strict=False)] = 60.0


class UpgradeConfig(_Model):
    """``[upgrade]``: when ``sparktui upgrade IMAGE`` keeps the new image
    (``sparktui.domain.upgrade.verdict``)."""

    #: The new image is kept only when its output tok/s is at least this share of the old image's, at every
    #: concurrency level both benchmarks measured (0.95: at most 5 % slower).
    min_speed_ratio: Annotated[float, Field(gt=0, le=2, strict=False)] = 0.95


#: The state changes ``[notify]`` can announce (``sparktui.domain.notify``); ``given_up``: the supervisor
#: stopped trying; ``rebooted``: the supervisor saw a node's boot id change (with its previous boot's cause);
#: ``slower``: serving slower than it should (``[serving] slow_ratio``).
NotifyEvent = Literal["ready", "failed", "wedged", "degraded", "node_lost", "stopped", "given_up", "rebooted",
                      "slower"]
NOTIFY_EVENTS: tuple[NotifyEvent, ...] = ("ready", "failed", "wedged", "degraded", "node_lost", "stopped",
                                          "given_up", "rebooted", "slower")


class NotifyConfig(_Model):
    """Who hears of state changes: a command (argv list; the JSON payload on its stdin) and/or a webhook."""

    command: tuple[NonEmpty, ...] = Field(default=(), strict=False)
    webhook: str | None = None
    events: tuple[NotifyEvent, ...] = Field(default=NOTIFY_EVENTS, strict=False)
    #: Seconds between two notifications of the same event (and node); those in between are counted.
    min_interval: Annotated[float, Field(ge=0, strict=False)] = 60.0
    #: Seconds a command or webhook may take before it is given up.
    timeout: Annotated[float, Field(gt=0, strict=False)] = 10.0

    @field_validator("webhook")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @property
    def enabled(self) -> bool:
        return bool(self.command or self.webhook)


class SparkConfig(_Model):
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    nodes: tuple[NodeConfig, ...] = Field(min_length=1, strict=False)
    engine: EngineConfig
    serving: ServingConfig = Field(default_factory=ServingConfig)
    ui: UIConfig = Field(default_factory=UIConfig)
    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    supervise: SuperviseConfig = Field(default_factory=SuperviseConfig)
    incidents: IncidentsConfig = Field(default_factory=IncidentsConfig)
    upgrade: UpgradeConfig = Field(default_factory=UpgradeConfig)

    @model_validator(mode="after")
    def _one_head(self) -> SparkConfig:
        heads = [n.name for n in self.nodes if n.role == "head"]
        if len(heads) != 1:
            raise ValueError(f"exactly one node must have role = \"head\", found {len(heads)}: {heads}")
        names = [n.name for n in self.nodes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"node names must be unique, repeated: {dupes}")
        return self

    @property
    def head(self) -> NodeConfig:
        return next(n for n in self.nodes if n.role == "head")

    @property
    def workers(self) -> tuple[NodeConfig, ...]:
        return tuple(n for n in self.nodes if n.role != "head")

    def node(self, name: str) -> NodeConfig:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)


def _control_characters(value: Any, loc: tuple[int | str, ...] = ()) -> list[ConfigProblem]:
    """Every string (value or key) holding a control character: a newline in a node name or a container
    prefix would break a command line, a log line or the screen, and is never meant."""
    found: list[ConfigProblem] = []
    if isinstance(value, str):
        bad = next((c for c in value if unicodedata.category(c) == "Cc"), None)
        if bad is not None:
            found.append(ConfigProblem(key_path(loc), f"control character U+{ord(bad):04X} in the value "
                                       f"(got {value!r})"))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and any(unicodedata.category(c) == "Cc" for c in key):
                found.append(ConfigProblem(key_path((*loc, key)), "control character in the key"))
            found += _control_characters(item, (*loc, key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found += _control_characters(item, (*loc, i))
    return found


def _key_binding_problems(data: Mapping[str, Any]) -> list[ConfigProblem]:
    ui = data.get("ui")
    keys = ui.get("keys") if isinstance(ui, Mapping) else None
    if not isinstance(keys, Mapping) or not all(isinstance(v, str) for v in keys.values()):
        return []  # pydantic names the wrong type
    return [ConfigProblem(f"ui.keys.{action}", fault) for action, fault in key_problems(keys).items()]


def parse_config(data: Mapping[str, Any], path: Path | str | None = None) -> SparkConfig:
    controls = _control_characters(data)
    if controls:
        # Reported alone: the same value's other faults would only repeat it.
        raise ConfigError(path, controls)
    keys = _key_binding_problems(data)
    data = apply_recipe(data, path)
    try:
        config = SparkConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # "nodes: at least 1 item" after every item failed is only an echo of those items' faults.
        deeper = {tuple(e["loc"][:n]) for e in errors for n in range(1, len(e["loc"]))}
        errors = [e for e in errors if not (e["type"] == "too_short" and tuple(e["loc"]) in deeper)]
        problems = [config_problem(e) for e in errors]
        if keys:  # one line per binding instead of pydantic's one for the whole table
            problems = [p for p in problems if p.key_path != "ui.keys"] + keys
        raise ConfigError(path, problems) from None
    fault = parallel_fit_fault(config.engine.tensor_parallel_size, config.engine.pipeline_parallel_size,
                               {n.name: n.gpus for n in config.nodes}, counted=False)
    if fault is not None:
        raise ConfigError(path, [ConfigProblem("engine.tensor_parallel_size", fault)])
    return config


def load_config(path: Path | str) -> SparkConfig:
    p = Path(path).expanduser()
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(p, [], headline=f"config file not found: {p}") from None
    except OSError as exc:
        raise ConfigError(p, [], headline=f"cannot read config file {p}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(p, [ConfigProblem("<file>", f"not UTF-8 text: {exc}")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(p, [ConfigProblem("<file>", f"TOML syntax error: {exc}")]) from None
    return parse_config(data, p)


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user's config, the one ``sparktui init`` writes: ``$XDG_CONFIG_HOME/sparktui/config.toml``, or
    ``~/.config/sparktui/config.toml`` (XDG Base Directory spec, as history and caches do)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME", "")
    # The spec says a relative path in the variable is invalid and must be ignored.
    root = Path(base) if base and os.path.isabs(base) else Path(env.get("HOME", "~")) / ".config"
    return root.expanduser() / "sparktui" / "config.toml"


def default_locations(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Where a config is looked for when neither ``--config`` nor ``$SPARKTUI_CONFIG`` names one, in order.

    The user's config comes before ``./config.toml``: run from the checkout, the shipped example there
    must not shadow the config ``sparktui init`` wrote.
    """
    return user_config_path(environ), Path("config.toml")


def find_config(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The config file to use: ``--config``, ``$SPARKTUI_CONFIG``, then the first of ``default_locations``
    that is a file.

    An explicit path (flag or variable) must exist; the default locations are optional.
    """
    env = os.environ if environ is None else environ
    for candidate in (explicit, env.get("SPARKTUI_CONFIG")):
        if candidate:
            return Path(candidate).expanduser()
    return next((p for p in default_locations(env) if p.is_file()), None)
