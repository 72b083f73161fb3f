"""What ``sparktui upgrade`` checks of a new image before any downtime, over the nodes' links: the image on
the head (pulled there when a registry answers), the same image ID on every node (copied by ``image sync``'s
stream), the rollback target still on every node, and the new image's vLLM — its version and whether its
``serve --help`` accepts every flag this engine is started with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle import vllm_help
from sparktui.domain.lifecycle.image_in_use import short_id, with_image
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.image_sync import ProgressFn, sync_image
from sparktui.remote.transport import TransportError

#: Seconds a ``docker pull`` on the head may take (a vLLM image is 10–20 GB).
PULL_TIMEOUT = 3600.0


@dataclass(frozen=True)
class Checked:
    ok: bool
    message: str
    image_id: str | None = None
    vllm_version: str | None = None


async def image_id(nodes: EngineNodes, node: str, image: str) -> str | None:
    try:
        res = await nodes.run(node, A.docker_image_id(image), 30)
    except TransportError:
        return None
    return res.stdout.strip() if res.ok and res.stdout.strip() else None


async def on_head(nodes: EngineNodes, image: str, say: Callable[[str], None]) -> Checked:
    """The new image on the head: there already, or pulled there (a registry answers), or why not."""
    head = nodes.config.head.name
    found = await image_id(nodes, head, image)
    if found is not None:
        return Checked(True, f"{image} is on {head} ({short_id(found)})", found)
    say(f"{image} is not on {head}: docker pull there")
    try:
        pulled = await nodes.run(head, ["docker", "pull", image], PULL_TIMEOUT)
    except TransportError as exc:
        return Checked(False, f"{image} is not on {head} and the pull could not run: {exc}")
    found = await image_id(nodes, head, image) if pulled.ok else None
    if found is None:
        why = (pulled.stderr or pulled.stdout).strip().splitlines()[-1:] or ["no answer"]
        return Checked(False, f"{image} is not on {head} and `docker pull` failed: {why[0][:200]} — load it "
                              f"there (`docker load`) and try again")
    return Checked(True, f"pulled {image} on {head} ({short_id(found)})", found)


async def distribute(nodes: EngineNodes, image: str, want: str, progress: ProgressFn | None) -> Checked:
    """The new image onto every node from the head, each verified by ID afterwards."""
    outcomes = await sync_image(with_image(nodes.config, image), nodes.transports, progress)
    bad = [o for o in outcomes if not o.ok]
    if bad:
        return Checked(False, "; ".join(f"{o.node}: {o.message}" for o in bad))
    ids = {name: await image_id(nodes, name, image) for name in nodes.transports}
    differ = {name: found for name, found in ids.items() if found != want}
    if differ:
        return Checked(False, "not the same image everywhere: " + ", ".join(
            f"{name} has {short_id(found) if found else 'none'}" for name, found in differ.items()))
    copied = [o.node for o in outcomes if o.action == "copied"]
    how = f"copied to {', '.join(copied)}" if copied else "already on every node"
    return Checked(True, f"{short_id(want)} on {', '.join(ids)} ({how})", want)


async def rollback_target(nodes: EngineNodes, image: str) -> Checked:
    """The image in use now, on every node: what a rollback starts again (never removed by an upgrade)."""
    ids = {name: await image_id(nodes, name, image) for name in nodes.transports}
    missing = [name for name, found in ids.items() if found is None]
    if missing:
        return Checked(False, f"the image in use, {image}, is missing on {', '.join(missing)}: no way back "
                              "if the new one fails — `sparktui image sync` first")
    if len(set(ids.values())) > 1:
        return Checked(False, f"the image in use, {image}, differs between nodes: `sparktui image sync` "
                              "first")
    found = next(iter(ids.values()))
    return Checked(True, f"{image} ({short_id(found)}) kept on every node for the way back", found)


async def vllm_of(nodes: EngineNodes, config: SparkConfig, image: str) -> Checked:
    """The new image's vLLM, run in a throw-away container on the head: its version, and every flag the
    engine is started with (sparktui's own and ``engine.extra_args``) against its ``serve --help``."""
    head = nodes.config.head.name
    vllm = config.engine.vllm_command
    try:
        ver = await nodes.run(head, A.docker_run_once(image, [*vllm, "--version"]), 180)
        version = vllm_help.parse_version(ver.stdout) if ver.ok else None
        if version is None:
            tail = (ver.stderr or ver.stdout).strip().splitlines()[-1:] or ["no output"]
            return Checked(False, f"`vllm --version` failed in {image}: {tail[0][:300]}")
        text = ""
        for arg in ("--help=all", "--help"):   # older vLLM rejects --help=all and lists all with --help
            res = await nodes.run(head, A.docker_run_once(image, A.vllm_serve_help(vllm, arg)), 180)
            if res.ok and len(vllm_help.flags_in_help(res.stdout)) >= 5:
                text = res.stdout
                break
    except TransportError as exc:
        return Checked(False, f"the new image's vLLM could not be asked: {exc}")
    if not text:
        return Checked(False, f"`vllm serve --help` failed in {image} (vLLM {version})", vllm_version=version)
    known = vllm_help.flags_in_help(text)
    argv = P.serve_argv(with_image(config, image), 0)
    generated = [f for f in vllm_help.flags_of(argv) if f not in config.engine.extra_args]
    lacking = [vllm_help.normalise(f) for f in generated if vllm_help.normalise(f) not in known]
    check = vllm_help.check_flags(config.engine.extra_args, known)
    problems = ([f"sparktui starts it with {', '.join(dict.fromkeys(lacking))}"] if lacking else []) + (
        [check.message(version)] if check.unknown or check.malformed else [])
    if problems:
        return Checked(False, f"vLLM {version} in {image} would not start this engine: "
                       + "; ".join(problems), vllm_version=version)
    return Checked(True, f"vLLM {version}: every flag of this engine accepted ({len(known)} known)",
                   vllm_version=version)
