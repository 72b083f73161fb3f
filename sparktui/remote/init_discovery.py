"""`sparktui init`'s discovery: what each host has, gathered over the project's SSH transports.

Per host, concurrently: the telemetry probe's one sample (memory, GPU through NVML or nvidia-smi, RDMA
ports with their netdevs, from the node's ``proc_root``/``sys_root``), HOST_PY (hostname, arch,
interfaces and addresses, disk, tools), docker (usable? the images that carry vLLM with their IDs and
the vLLM version inside), vLLM on the host, and the model scan (HF cache, ``~/models``). Then, once each
node's cable address is known, every node tries the others' cable addresses (TCP to their SSH port).
Every command is an argv list; nothing of the user's reaches a remote shell unquoted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sparktui.config import NodeConfig
from sparktui.domain.init_setup import (
    DOCKER_IMAGES_FORMAT,
    HOST_PY,
    REACH_PY,
    DiscoveredHost,
    Image,
    InitOptions,
    choose_cable,
    vllm_images,
)
from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import vllm_help
from sparktui.domain.model_files import model_info_argv, parse_model_info, parse_model_scan
from sparktui.remote.cluster import make_transport
from sparktui.remote.probe_runner import probe_argv, probe_source
from sparktui.remote.transport import LinkPhase, Transport, TransportError

#: At most this many images per node are started to ask for their vLLM version.
MAX_IMAGES = 4


def provisional_node(host: str, index: int, opts: InitOptions) -> NodeConfig:
    return NodeConfig(name=host, host=host, user=opts.user, port=opts.port,
                      identity_file=opts.identity_file, known_hosts=opts.known_hosts, python=opts.python,
                      proc_root=opts.proc_root, sys_root=opts.sys_root,
                      role="head" if index == 0 else "worker")


async def _facts(t: Transport, node: NodeConfig, opts: InitOptions) -> DiscoveredHost:
    h = DiscoveredHost(host=node.host)
    # connect() has waited for the first attempt: init says at once why a host cannot be reached
    # (the transport would keep retrying in the background).
    state = t.state
    if state.phase is not LinkPhase.CONNECTED:
        raise TransportError(state.last_error or state.describe())
    h.reachable = True
    res = await t.run([node.python, "-c", HOST_PY], timeout=60)
    report = last_json_object(res.stdout)
    if report is None:
        h.error = f"{node.python} on the node failed: {(res.stderr or res.stdout).strip()[-300:]}"
        return h
    h.apply_host_report(report)
    jobs = [_probe(t, node, h), _docker(t, h), _host_vllm(t, h), _models(t, node, h, opts)]
    await asyncio.gather(*jobs)
    return h


async def _probe(t: Transport, node: NodeConfig, h: DiscoveredHost) -> None:
    argv = probe_argv(node, 0.2, count=1, follow_stdin=False, extra_args=["--no-containers"])
    res = await t.run(argv, input=probe_source(), timeout=60)
    sample = last_json_object(res.stdout)
    if sample is not None:
        h.apply_probe_sample(sample)


async def _docker(t: Transport, h: DiscoveredHost) -> None:
    if not h.tools.get("docker"):
        h.docker_error = "docker not installed"
        return
    ver = await t.run(A.docker_version(), timeout=30)
    if not ver.ok:
        last = (ver.stderr or ver.stdout).strip().splitlines()[-1:] or ["not usable"]
        h.docker_error = f"docker not usable: {last[0]}"
        return
    h.docker = ver.stdout.strip()
    res = await t.run(["docker", "images", "--no-trunc", "--format", DOCKER_IMAGES_FORMAT], timeout=30)
    images = vllm_images(res.stdout)

    async def version(ref: str, iid: str) -> Image:
        out = await t.run(A.docker_run_once(ref, A.vllm_version(["vllm"])), timeout=180)
        return Image(ref, iid, vllm_help.parse_version(out.stdout) if out.ok else None)

    h.images = list(await asyncio.gather(*(version(r, i) for r, i in images[:MAX_IMAGES])))


async def _host_vllm(t: Transport, h: DiscoveredHost) -> None:
    if h.tools.get("vllm"):
        res = await t.run(A.vllm_version(["vllm"]), timeout=120)
        h.host_vllm = vllm_help.parse_version(res.stdout) if res.ok else None


async def _models(t: Transport, node: NodeConfig, h: DiscoveredHost, opts: InitOptions) -> None:
    scan = await t.run(model_info_argv(node.python, scan=True), timeout=120)
    try:
        _, h.models = parse_model_scan(scan.stdout)
    except ValueError:
        h.models = []
    if opts.model and opts.model.startswith(("/", "~")):
        res = await t.run(model_info_argv(node.python, path=opts.model), timeout=60)
        try:
            one = parse_model_info(res.stdout)
        except ValueError:
            return
        if one.exists:
            h.models.insert(0, one)


async def _reach(t: Transport, node: NodeConfig, h: DiscoveredHost,
                 peers: dict[str, tuple[str, int]]) -> None:
    async def one(name: str, ip: str, port: int) -> None:
        try:
            res = await t.run([node.python, "-c", REACH_PY, ip, str(port), "3"], timeout=30)
            h.reaches[name] = res.stdout.strip() or (res.stderr.strip() or f"exit {res.returncode}")
        except TransportError as exc:
            h.reaches[name] = str(exc)

    await asyncio.gather(*(one(n, ip, port) for n, (ip, port) in peers.items()))


async def discover(hosts: Sequence[str], opts: InitOptions) -> list[DiscoveredHost]:
    """Facts of every host (an unreachable one has ``reachable = False`` and its ``error``)."""
    nodes = [provisional_node(h, i, opts) for i, h in enumerate(hosts)]
    transports = [make_transport(n) for n in nodes]
    await asyncio.gather(*(t.connect() for t in transports))
    try:
        async def one(t: Transport, node: NodeConfig) -> DiscoveredHost:
            try:
                return await _facts(t, node, opts)
            except TransportError as exc:
                return DiscoveredHost(host=node.host, reachable=False, error=str(exc))

        facts = list(await asyncio.gather(*(one(t, n) for t, n in zip(transports, nodes, strict=True))))
        cables = {h.host: choose_cable(h) for h in facts if h.reachable}
        jobs = []
        for t, node, h in zip(transports, nodes, facts, strict=True):
            if not h.reachable:
                continue
            peers = {o.host: (cables[o.host].ip or o.host, opts.port or 22)
                     for o in facts if o is not h and o.reachable and o.host in cables}
            jobs.append(_reach(t, node, h, peers))
        await asyncio.gather(*jobs)
        return facts
    finally:
        await asyncio.gather(*(t.close() for t in transports), return_exceptions=True)
