"""The demo's ``upgrade`` scenario: another sparktui runs ``sparktui upgrade IMAGE --dry-run`` on the
serving demo cluster — every stage before any downtime, then "checked, nothing changed" — kept as the real
one keeps it on the head (``sparktui.domain.upgrade.progress``), so the dashboard shows it with the code
that shows a real one. A pure function of the demo's clock, as the rest of the demo."""

from __future__ import annotations

from dataclasses import replace

from sparktui.domain.upgrade.progress import UpgradeRecord

#: The image the demo's upgrade tries, and its ID (made up, in docker's form).
IMAGE = "nvcr.io/nvidia/vllm:26.05-py3"
IMAGE_ID = "sha256:3c9d5e7f0a1b" + "4" * 52
#: Who runs it: another person's laptop.
HOST, PID = "laptop", 31337
#: The image's size as the distribution copies it to spark2, MB.
IMAGE_MB = 18_400
#: (stage, seconds, its message while it runs, its message once done), in the upgrade's order.
SCRIPT: tuple[tuple[str, float, str, str], ...] = (
    ("image", 4.0, f"{IMAGE} is not on spark1: docker pull there",
     f"pulled {IMAGE} on spark1 (3c9d5e7f0a1b)"),
    ("way back", 1.0, "", "{previous} kept on every node for the way back"),
    ("check", 6.0, f"vLLM in {IMAGE}", "vLLM 0.23.0: every flag of this engine is in its serve --help; "
                                       "Qwen3MoeForCausalLM is in the new vLLM's model registry"),
    ("distribute", 14.0, "3c9d5e7f0a1b to every node", "3c9d5e7f0a1b on spark1, spark2 (copied to spark2)"),
    ("baseline", 8.0, "smoke test and a short benchmark of the serving engine",
     "measured now: smoke 38.2 tok/s, 41.0 tok/s at 1, 118.6 tok/s at 4"),
)
#: Seconds the whole scripted upgrade takes.
SECONDS = sum(seconds for _, seconds, _, _ in SCRIPT)


def demo_upgrade(previous: str, began: float, now: float) -> UpgradeRecord:
    """Its record at ``now`` (epoch seconds; it began at ``began``): as it would be read from the head."""
    record = UpgradeRecord(IMAGE, previous, HOST, PID, began, began, dry_run=True)
    t = began
    for name, seconds, running, done in SCRIPT:
        if now < t:
            return record
        if name == "distribute":
            sent = IMAGE_MB * min(1.0, (now - t) / seconds)
            running = f"spark2: {sent:.0f} MB in {now - t:.0f} s"
        record = record.stage(name, "running", running, t)
        if name == "image" and now >= t + 1.5:   # pulled: its ID is known from here on
            record = replace(record, image_id=IMAGE_ID)
        if now < t + seconds:
            return record.beat(now)
        t += seconds
        record = record.stage(name, "ok", done.format(previous=previous), t)
    return record.finish("checked", "every check passed; nothing was changed (--dry-run)", None, t)
