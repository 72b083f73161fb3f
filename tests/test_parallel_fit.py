"""TP × PP against the GPUs: refused at config load (so by `start --dry-run` too) when the nodes' `gpus` (one
GB10 each by default) cannot hold it, and by preflight against the GPUs counted on the nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.commands.exit_status import ExitStatus
from sparktui.config import ConfigError, load_config
from sparktui.domain.events import StepStatus
from sparktui.domain.lifecycle.gpus import WORLD_CHECK, check_world, counted_gpus
from sparktui.domain.parallel_fit import parallel_fit_fault
from tests.cli_helpers import run_sparktui
from tests.config_texts import TWO_SPARKS
from tests.local_node import write_local_config

ONE_GPU = "GPU 0: NVIDIA GB10 (UUID: GPU-0b2f6b4e-1)\n"


def test_tp3_on_two_one_gpu_nodes_is_refused_at_config_load_naming_keys_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TWO_SPARKS + "tensor_parallel_size = 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).splitlines() == [
        f"{path}: invalid config",
        f"  {path}: engine.tensor_parallel_size: the engine needs 3 × 1 = 3 GPUs "
        "(engine.tensor_parallel_size × engine.pipeline_parallel_size: one worker per GPU), but the nodes "
        "have 2 GPU(s) (spark1 1, spark2 1; a node's `gpus` key, default 1: a DGX Spark has one): lower "
        "engine.tensor_parallel_size to 2, or add nodes (or set `gpus` on a node that has more)"]


def test_a_node_with_more_gpus_says_so_and_fits(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TWO_SPARKS.replace('host = "spark2"', 'host = "spark2"\ngpus = 2')
                    + "tensor_parallel_size = 3\n")
    config = load_config(path)
    assert config.node("spark2").gpus == 2 and config.engine.tensor_parallel_size == 3


def test_start_dry_run_refuses_it_and_prints_no_plan(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TWO_SPARKS + "tensor_parallel_size = 3\n")
    out = run_sparktui("--config", str(path), "start", "--dry-run")
    assert out.returncode == ExitStatus.USAGE and out.stdout == ""
    assert "engine.tensor_parallel_size: the engine needs 3 × 1 = 3 GPUs" in out.stderr


def test_the_fix_names_pipeline_parallel_size_when_tp_1_cannot_fit() -> None:
    fault = parallel_fit_fault(1, 3, {"a": 1, "b": 1}, counted=False)
    assert fault is not None and "lower engine.pipeline_parallel_size to 2 or less" in fault
    assert parallel_fit_fault(2, 2, {"a": 2, "b": 2}, counted=True) is None


def test_preflight_judges_the_gpus_counted() -> None:
    assert counted_gpus(0, ONE_GPU, "") == 1
    assert counted_gpus(6, "No devices were found\n", "") == 0
    assert counted_gpus(127, "", "sh: 1: nvidia-smi: not found") is None
    ok = check_world(2, 1, {"spark1": 1, "spark2": 1})
    assert ok is not None and ok.status is StepStatus.OK
    assert check_world(3, 1, {"spark1": 1, "spark2": None}) is None   # a count unknown: its own check says so
    short = check_world(3, 1, {"spark1": 1, "spark2": 1})
    assert short is not None and short.status is StepStatus.FAILED
    assert ("but the nodes have 2 GPU(s) (counted: spark1 1, spark2 1): lower engine.tensor_parallel_size "
            "to 2") in short.message


def test_a_start_whose_config_claims_more_gpus_than_counted_fails_preflight(tmp_path: Path) -> None:
    # The real preflight on this machine as a local node, its GPU listing one GB10 while the config says two.
    path = write_local_config(tmp_path / "config.toml", "fit-test",
                              engine=f'gpu_list_command = ["sh", "-c", "printf \'{ONE_GPU.strip()}\'"]')
    path.write_text(path.read_text().replace('role = "head"', 'role = "head"\ngpus = 2')
                    .replace("tensor_parallel_size = 1", "tensor_parallel_size = 2"))
    out = run_sparktui("--config", str(path), "start")
    assert out.returncode == ExitStatus.NOT_WELL, out.stdout + out.stderr
    assert (f"FAILED -          preflight: {WORLD_CHECK}: the engine needs 2 × 1 = 2 GPUs "
            "(engine.tensor_parallel_size × engine.pipeline_parallel_size: one worker per GPU), but the "
            "nodes have 1 GPU(s) (counted: local 1): lower engine.tensor_parallel_size to 1, or add nodes"
            ) in out.stdout
    assert "preflight: GPUs: 1 GPU(s) on the node, but this node's `gpus` says 2: set gpus = 1" in out.stdout
