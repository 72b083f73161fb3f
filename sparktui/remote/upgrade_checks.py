"""What ``sparktui upgrade`` checks of a new image before any downtime, over the nodes' links: the image on
the head (pulled there when a registry answers), the same image ID on every node (copied by ``image sync``'s
stream), the rollback target still on every node, and the new image's vLLM — its version and whether its
``serve --help`` accepts every flag this engine is started with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import vllm_help
from sparktui.domain.lifecycle.preflight_plan import model_argv
from sparktui.domain.model_files import parse_model_info
from sparktui.domain.upgrade import serve_help as H
from sparktui.domain.upgrade.flag_check import check_recipe
from sparktui.domain.upgrade.images import short_id, with_image
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
    """The new image's vLLM, run in throw-away containers on the head: its version, and every flag the
    engine is started with (sparktui's own and ``engine.extra_args``, every rank's) against its
    ``serve --help`` (``domain/upgrade/flag_check``: a flag it lacks named, with its replacement)."""
    head = nodes.config.head.name
    try:
        ver = await nodes.run(head, H.image_version_argv(config, image), 180)
        version = vllm_help.parse_version(ver.stdout) if ver.ok else None
        if version is None:
            tail = (ver.stderr or ver.stdout).strip().splitlines()[-1:] or ["no output"]
            return Checked(False, f"`vllm --version` failed in {image}: {tail[0][:300]}")
        answers: list[tuple[bool, str]] = []
        for argv in H.image_help_argvs(config, image):
            res = await nodes.run(head, argv, 180)
            answers.append((res.ok, res.stdout))
            if res.ok and not H.is_summary(res.stdout) and len(vllm_help.flags_in_help(res.stdout)) >= 5:
                break
    except TransportError as exc:
        return Checked(False, f"the new image's vLLM could not be asked: {exc}")
    report = check_recipe(with_image(config, image), H.read_help(answers, ver.stdout))
    if not report.ok:
        return Checked(False, f"vLLM {version} in {image} would not start this engine: {report.message()}",
                       vllm_version=version)
    return Checked(True, report.message(), vllm_version=version)


#: Asked of the new image's Python: every architecture its vLLM's model registry knows, one a line.
REGISTRY_PY = ("from vllm.model_executor.models import ModelRegistry\n"
               "print('\\n'.join(sorted(ModelRegistry.get_supported_archs())))")


async def architecture(nodes: EngineNodes, config: SparkConfig, image: str) -> Checked:
    """The model's architecture (its config.json on the head) in the new vLLM's model registry, where the
    image can tell: an image whose Python cannot import vLLM's registry is not judged (said so)."""
    head = nodes.config.head
    try:
        found = await nodes.run(head.name, model_argv(config, head), 60)
        model = parse_model_info(found.stdout) if found.ok else None
    except (TransportError, ValueError):
        model = None
    archs = [str(a) for a in ((model.config or {}).get("architectures") or [])] if model else []
    if not archs:
        return Checked(True, "architecture: not known (no config.json read on the head)")
    try:
        res = await nodes.run(head.name, A.docker_run_once(image, ["python3", "-c", REGISTRY_PY]), 180)
    except TransportError as exc:
        return Checked(True, f"{archs[0]}: the registry not read ({exc})")
    known = {line.strip() for line in res.stdout.splitlines() if line.strip()} if res.ok else set()
    if not known:
        return Checked(True, f"{archs[0]}: this image's vLLM model registry cannot be read here, not judged")
    missing = [a for a in archs if a not in known]
    if missing:
        return Checked(False, f"{', '.join(missing)} is not in the new vLLM's model registry "
                              f"({len(known)} architectures): it cannot load this model")
    return Checked(True, f"{archs[0]} is in the new vLLM's model registry")
