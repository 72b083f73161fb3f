"""Preflight as a plan of data: which facts are gathered on which node, in which order (pure).

One phase, every node at once; on a node, everything waits for ``reachable`` (nothing more is asked of a
node that is not), and with docker the image's vLLM is asked only once docker and the image are there
(``docker run`` of a missing image would try a registry, and its error would hide the cause). The
executor (``sparktui.remote.preflight_checks``) gathers; ``preflight``'s checks judge what it gathered.
"""

from __future__ import annotations

from sparktui.config import NodeConfig, SparkConfig
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import gpus as G
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.audit import audit_commands
from sparktui.domain.lifecycle.links import link_argv
from sparktui.domain.lifecycle.preflight import model_hf_home, model_host_path
from sparktui.domain.model_files import model_info_argv

REACHABLE = "reachable"
DOCKER = "docker"
#: The row of a vLLM question that docker cannot answer on this node.
DOCKER_UNUSABLE = "not run: docker or the image is not usable on this node"


def build_preflight_plan(config: SparkConfig) -> P.Plan:
    """Every node's gathering steps, concurrently; the head also reads vLLM's flags and the model."""
    steps = [s for node in config.nodes for s in node_steps(config, node)]
    return P.Plan("preflight", (P.Phase("preflight on every node", tuple(steps)),), list_when_run=True,
                  row_prefix="preflight: ")


def node_steps(config: SparkConfig, node: NodeConfig) -> list[P.Step]:
    e = config.engine
    rt = P.runtimes(config)[node.name]
    docker = e.runtime == "docker"
    name = node.name
    is_head = node is config.head

    def before_start(argv: list[str]) -> tuple[str, ...]:
        # No engine container exists yet: docker asks a throw-away one of the image.
        return tuple(A.docker_run_once(e.image, argv) if docker else rt.wrap(argv))

    after = (REACHABLE,)
    gated_by = (DOCKER,) if docker else ()
    steps = [
        P.Step(REACHABLE, name, (), 20.0, P.StepKind.REACH),
        P.Step("node facts", name, tuple(P.facts_argv(config, node, model_host_path(config))), 120.0,
               P.StepKind.FACTS, after=after),
        P.Step("link facts", name, tuple(link_argv(config, node)), 60.0, P.StepKind.LINK, after=after,
               shown=False),
    ]
    if docker:
        steps.append(P.Step(DOCKER, name, tuple(A.docker_version()), 30.0, P.StepKind.DOCKER, after=after,
                            also=(tuple(A.docker_image_id(e.image)), tuple(A.docker_ps(e.name_prefix)))))
    steps.append(P.Step("vLLM version", name, before_start(A.vllm_version(e.vllm_command)), 180.0,
                        P.StepKind.VLLM_VERSION, after=after, gated_by=gated_by,
                        gate_message=DOCKER_UNUSABLE))
    gpu_cmd = list(e.gpu_list_command)
    steps.append(P.Step("GPUs", name, tuple(G.gpu_list_docker_argv(e.image, gpu_cmd) if docker
                                            else rt.wrap(gpu_cmd)), 120.0, P.StepKind.GPUS, after=after))
    if len(config.nodes) > 1:
        # The nodes compared (judged once all have answered); with docker the image's world is asked too.
        audit = audit_commands(config, node)
        steps.append(P.Step("audit facts", name, audit.host, 120.0, P.StepKind.AUDIT, after=after,
                            shown=False, also=(audit.engine,) if audit.engine else (), gated_by=gated_by,
                            gate_message=DOCKER_UNUSABLE))
    if is_head:
        steps.append(P.Step("vLLM help", name, before_start(A.vllm_serve_help(e.vllm_command, "--help=all")),
                            180.0, P.StepKind.VLLM_HELP, after=after,
                            # Older vLLM has no grouped help and rejects "--help=all".
                            fallback=before_start(A.vllm_serve_help(e.vllm_command)),
                            gated_by=gated_by, gate_message=DOCKER_UNUSABLE))
        steps.append(P.Step("model for sizing", name, tuple(model_argv(config, node)), 60.0,
                            P.StepKind.MODEL_INFO, after=after, shown=False))
    return steps


def model_argv(config: SparkConfig, node: NodeConfig) -> list[str]:
    """The model directory's (or the HF cache's snapshot of a model id's) config.json and safetensors
    headers, read on ``node`` (memory sizing)."""
    req = model_request(config)
    return model_info_argv(node.python, path=req.get("path"), hf_id=req.get("hf_id"),
                           hf_home=req.get("hf_home"))


def model_request(config: SparkConfig) -> dict[str, str]:
    """Where a node finds the model's files: ``{"path": DIR}`` (as seen on the node), or ``{"hf_id": ID,
    "hf_home": DIR}`` for a Hugging Face id (``model_hf_home``; none: the node's $HF_HOME or
    ~/.cache/huggingface). The node scripts ``model_info`` and ``read_rate`` take it as their request."""
    e = config.engine
    path = model_host_path(config)
    if path:
        return {"path": path}
    hf_home = model_hf_home(config)
    return {"hf_id": e.model, **({"hf_home": hf_home} if hf_home else {})}
