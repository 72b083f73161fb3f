"""Does the engine's world fit the GPUs? vLLM runs one worker per GPU, TP × PP of them (its world size), and
refuses to start when the cluster has fewer ("TP size 3 exceeds available GPUs 2"), after minutes of
container and Ray start. The rule is checked three times, in the same words: at config load against the
GPUs the config says each node has (``gpus``, default 1: a DGX Spark has one GB10), by ``start --dry-run``
(the same config load), and by preflight against the GPUs counted on the nodes.

Pure code: used by the config module and by preflight.
"""

from __future__ import annotations

from collections.abc import Mapping


def parallel_fit_fault(tp: int, pp: int, gpus: Mapping[str, int], *, counted: bool) -> str | None:
    """None when TP × PP workers fit the GPUs (``gpus``: node name -> GPUs), else a sentence with the fix.
    ``counted``: the numbers were counted on the nodes (preflight), not read from the config."""
    world = tp * pp
    total = sum(gpus.values())
    if world <= total:
        return None
    each = ", ".join(f"{name} {n}" for name, n in gpus.items())
    have = (f"the nodes have {total} GPU(s) (counted: {each})" if counted else
            f"the nodes have {total} GPU(s) ({each}; a node's `gpus` key, default 1: a DGX Spark has one)")
    lower = (f"lower engine.tensor_parallel_size to {total // pp}" if total >= pp else
             f"lower engine.pipeline_parallel_size to {total} or less")
    return (f"the engine needs {tp} × {pp} = {world} GPUs (engine.tensor_parallel_size × "
            f"engine.pipeline_parallel_size: one worker per GPU), but {have}: {lower}, or add nodes"
            + ("" if counted else " (or set `gpus` on a node that has more)"))
