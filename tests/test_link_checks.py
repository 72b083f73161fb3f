"""Preflight link checks: LINK_PY run on the two-Spark fixture sysfs (a copy changed per case) and judged:
1500 MTU, one HCA down, a 100 G link, no RoCE v2 GID, an unreachable peer — each named."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.lifecycle.links import LinkFacts, check_links, link_argv, link_views
from tests.fixtures.telemetry import sparks

IF = "enp1s0f1np1"


def config(root: Path, **node: object) -> object:
    return parse_config({
        "nodes": [{"name": "spark1", "host": "127.0.0.1", "role": "head", "python": sys.executable,
                   "sys_root": str(root / "sys"), **node},
                  {"name": "spark2", "host": "127.0.0.1"}],
        "engine": {"model": "m"},
    }, "<test>")


def gather(root: Path, **node: object) -> tuple[LinkFacts, list[StepView]]:
    cfg = config(root, **node)
    argv = link_argv(cfg, cfg.head)  # type: ignore[attr-defined]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    facts = LinkFacts.parse(out.stdout)
    return facts, link_views(cfg, {"spark1": facts})  # type: ignore[arg-type]


def by_name(views: list[StepView]) -> dict[str, list[StepView]]:
    out: dict[str, list[StepView]] = {}
    for v in views:
        out.setdefault(v.name, []).append(v)
    return out


@pytest.fixture
def spark(tmp_path: Path) -> Path:
    return sparks.copy_spark("spark-a", tmp_path)


def test_a_healthy_cable_passes(spark: Path) -> None:
    facts, views = gather(spark)
    checks = by_name(views)
    assert all(v.status is StepStatus.OK for v in views), views
    assert checks["both HCAs"][0].message == "rocep1s0f1, roceP2p1s0f1 ACTIVE"
    assert [v.message for v in checks["link speed"]] == ["enP2p1s0f1np1 at 200 Gb/s",
                                                         "enp1s0f1np1 at 200 Gb/s"]
    assert "GID 1" in checks["RoCE v2 GID"][0].message
    assert checks["peer reachable"][0].message.startswith("spark2 (127.0.0.1) answers")
    assert facts.netdevs[IF]["mtu"] == "9000"


def test_mtu_1500_is_named(spark: Path) -> None:
    sparks.set_sys(spark, f"class/net/{IF}/mtu", "1500")
    _, views = gather(spark, interface=IF)
    mtu = [v for v in views if v.name == "MTU" and v.status is StepStatus.WARNING]
    assert len(mtu) == 1 and f"{IF} MTU 1500" in mtu[0].message and "9000" in mtu[0].message


def test_one_hca_down_is_named(spark: Path) -> None:
    sparks.set_sys(spark, "class/infiniband/roceP2p1s0f1/ports/1/state", "1: DOWN")
    _, views = gather(spark, rdma_devices=list(sparks.CABLE))
    (hca,) = [v for v in views if v.name == "both HCAs"]
    assert hca.status is StepStatus.WARNING and hca.node == "spark1"
    assert hca.message.startswith("roceP2p1s0f1 1: DOWN") and "half the bandwidth" in hca.message


def test_100g_link_is_named(spark: Path) -> None:
    sparks.set_sys(spark, f"class/net/{IF}/speed", "100000")
    _, views = gather(spark)
    (slow,) = [v for v in views if v.name == "link speed" and v.status is StepStatus.WARNING]
    assert slow.message.startswith(f"{IF} at 100 Gb/s, not 200 Gb/s")


def test_missing_rocev2_gid_is_named(spark: Path) -> None:
    types = spark / "sys/class/infiniband/rocep1s0f1/ports/1/gid_attrs/types"
    shutil.rmtree(types)
    _, views = gather(spark)
    (gid,) = [v for v in views if v.name == "RoCE v2 GID"]
    assert gid.status is StepStatus.WARNING and "no RoCE v2 GID on rocep1s0f1" in gid.message


def test_unreachable_peer_fails_and_unreadable_report_warns() -> None:
    facts = LinkFacts(interface=IF, reach={"10.0.0.2": "ETIMEDOUT Connection timed out"})
    (view,) = check_links("spark1", facts, peers={"spark2": "10.0.0.2"})
    assert view.status is StepStatus.FAILED
    assert view.message == f"spark2 (10.0.0.2) not reachable over {IF}: ETIMEDOUT Connection timed out"
    cfg = config(Path("/nonexistent"))
    (warn,) = link_views(cfg, {"spark1": "exit 1: python3 not found"})  # type: ignore[arg-type]
    assert warn.status is StepStatus.WARNING and "unreadable" in warn.message
    with pytest.raises(ValueError):
        LinkFacts.parse("garbage")
