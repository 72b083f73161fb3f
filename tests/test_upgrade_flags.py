"""`sparktui upgrade`'s flag check (pure): real `vllm serve --help` texts read into accepted flags, and the
recipe's flags judged against them (tests/fixtures/vllm_help/README.md says where each text comes from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.domain.upgrade import flag_check as C
from sparktui.domain.upgrade.serve_help import (
    HELP_ALL,
    help_argvs,
    image_help_argvs,
    image_version_argv,
    is_summary,
    parse_serve_help,
    read_help,
)

HELP = Path(__file__).parent / "fixtures" / "vllm_help"


def text(name: str) -> str:
    return (HELP / name).read_text(encoding="utf-8")


def config(**engine: object):  # type: ignore[no-untyped-def]
    return parse_config({"nodes": [{"name": "spark1", "host": "a", "role": "head"},
                                   {"name": "spark2", "host": "b"}],
                         "engine": {"runtime": "docker", "model": "/models/m", **engine}})


# ---- reading the help ---------------------------------------------------------------------------------
def test_flat_help_of_vllm_0_8() -> None:
    h = parse_serve_help(text("vllm-0.8-serve-help.txt"))
    assert not h.summary
    # aliases, printed after the long spelling
    assert h.option("-O") is h.option("--compilation-config")
    assert h.option("-dp") is h.option("--data-parallel-size")
    # both halves of a boolean pair
    assert h.accepts("--enable-prefix-caching") and h.accepts("--no-enable-prefix-caching")
    assert not h.accepts("--no-enforce-eager")   # a store_true switch in 0.8 has no --no- half
    # vLLM's FlexibleArgumentParser rewrites _ to - and splits -O3
    assert h.accepts("--gpu_memory_utilization=0.8") and h.accepts("--distributed_executor_backend")
    assert h.accepts("-O3")
    assert not h.accepts("--compilation-config.level")   # 0.8 has no per-key JSON flags
    assert not h.accepts("--runner")
    origins = h.option("--allowed-origins")
    assert origins is not None and origins.group == "options"


def test_deprecation_note_as_vllm_wrote_it() -> None:
    h = parse_serve_help(text("vllm-0.8-serve-help.txt"))
    dep = h.deprecations()
    assert list(dep) == ["--use-v2-block-manager"]
    note = dep["--use-v2-block-manager"].deprecation_note
    assert note.startswith("[DEPRECATED] block manager v1 has been removed")
    assert dep["--use-v2-block-manager"].replacement is None


def test_grouped_help_all_of_vllm_0_22() -> None:
    h = parse_serve_help(text("vllm-0.22-serve-help-all.txt"))
    assert not h.summary
    assert h.option("-asc") is h.option("--api-server-count")
    assert h.accepts("--no-allow-credentials") and h.accepts("--enable-log-requests")
    assert not h.accepts("--disable-log-requests")       # removed (vllm-project/vllm#35723)
    assert [getattr(h.option(f), "group", None) for f in ("--allow-credentials", "--grpc")] == ["Frontend",
                                                                                                 "options"]
    # an option printed without help text is still an option
    assert h.accepts("--chat-template") and h.accepts("--enable-log-outputs")
    # a help line that starts with "-" inside a description is no option
    assert not h.accepts("-")


def test_old_usage_line_and_cut_paste() -> None:
    h = parse_serve_help(text("vllm-0.6-serve-help.txt"))
    assert h.accepts("--api-key") and h.accepts("--block-size")
    assert len(h.options) == 8


def test_summary_help_cannot_judge_flags() -> None:
    summary = text("vllm-grouped-summary-help.txt")
    assert is_summary(summary)
    h = parse_serve_help(summary)
    assert h.summary and not h.flags
    assert not is_summary(text("vllm-0.22-serve-help-all.txt"))
    assert not is_summary(text("vllm-0.8-serve-help.txt"))


def test_json_keys_one_by_one_where_the_build_says_so() -> None:
    h = parse_serve_help(text("vllm-structured-outputs-group-help.txt"))
    assert h.dotted_keys
    assert h.accepts("--reasoning-parser.something")
    assert h.option("--reasoning_parser") is not None
    assert not h.accepts("--structured-outputs-config.backend")   # no such base flag in this text


def test_version_from_vllm_version_or_the_text() -> None:
    assert parse_serve_help("", "INFO noise\n0.11.1\n").version == "0.11.1"
    server = "INFO 06-17 20:29:40 [api_server.py:1287] vLLM API server version 0.9.2.dev121+g4c8f64faa\n"
    assert parse_serve_help(server).version == "0.9.2.dev121+g4c8f64faa"
    assert parse_serve_help(text("vllm-0.8-serve-help.txt")).version is None


def test_garbage_never_raises() -> None:
    for junk in ("", "\x00\x01", "--", "  --", "usage:", "  -h, --help", "Config Groups:\n  -x y z"):
        parse_serve_help(junk)


def test_help_commands_in_order() -> None:
    assert help_argvs(["vllm"]) == [["vllm", "serve", HELP_ALL], ["vllm", "serve", "--help"]]
    assert help_argvs(["python3", "-m", "vllm.entrypoints.cli.main"])[0][-2:] == ["serve", "--help=all"]


# ---- judging the recipe's flags -------------------------------------------------------------------------
def test_recipe_flags_are_what_a_start_sends() -> None:
    flags = C.recipe_flags(config(extra_args=["--max-model-len", "4096", "--enforce-eager"]))
    assert flags == ["--tensor-parallel-size", "--distributed-executor-backend", "--port", "--max-model-len",
                     "--enforce-eager"]
    mp = C.recipe_flags(config(executor="mp"))
    assert "--headless" in mp and "--master-addr" in mp and mp.count("--nnodes") == 1


def test_every_flag_taken() -> None:
    h = parse_serve_help(text("vllm-0.8-serve-help.txt"), "0.8.3")
    report = C.check_recipe(config(extra_args=["--gpu_memory_utilization", "0.8", "-O3"]), h)
    # --tensor-parallel-size and --port are not in the excerpt: judge only what it lists
    assert [f.flag for f in report.missing] == ["--tensor-parallel-size", "--port"]
    full = C.check_serve_flags(["--distributed-executor-backend", "ray", "--gpu_memory_utilization=0.8"], h)
    assert full.ok and not full.findings
    assert full.message() == "vLLM 0.8.3 takes every flag the recipe passes (2)"


def test_removed_flag_named_with_its_replacement() -> None:
    h = parse_serve_help(text("vllm-0.22-serve-help-all.txt"), "0.22.0")
    report = C.check_serve_flags(["--disable-log-requests", "--grpc", "--task", "generate",
                                  "--enable-log-requests"], h)
    assert not report.ok
    assert report.lines() == [
        "--disable-log-requests: not accepted by vLLM 0.22.0 (request logging is off by default now: drop it "
        "(--enable-log-requests turns it on); vllm-project/vllm#21739, #35723)",
        "--task: not accepted by vLLM 0.22.0 (renamed --runner in 0.13; --runner generate|pooling, and "
        "--convert for a pooling model; vllm-project/vllm#21470, #30397)",
    ]


def test_unknown_flag_without_a_known_replacement() -> None:
    h = parse_serve_help(text("vllm-0.22-serve-help-all.txt"), "0.22.0")
    report = C.check_serve_flags(["--no-such-flag=1"], h)
    assert report.lines() == ["--no-such-flag: not accepted by vLLM 0.22.0"]
    assert C.check_serve_flags(["--guided-decoding-backend", "xgrammar"], h).lines() == [
        "--guided-decoding-backend: not accepted by vLLM 0.22.0 (renamed "
        "--structured-outputs-config.backend; vllm-project/vllm#22772)"]


def test_deprecated_flag_warns_but_passes() -> None:
    h = parse_serve_help(text("vllm-0.8-serve-help.txt"), "0.8.3")
    report = C.check_serve_flags(["--use-v2-block-manager"], h)
    assert report.ok and len(report.deprecated) == 1
    line = report.lines()[0]
    assert line.startswith("--use-v2-block-manager: deprecated in vLLM 0.8.3 (")
    assert "it had no effect since block manager v1 was removed" not in line   # vLLM's own words first
    assert "[DEPRECATED] block manager v1 has been removed" in line


def test_replacement_read_from_the_help_text() -> None:
    help_text = ("options:\n  --old-flag OLD_FLAG   [DEPRECATED] This is deprecated; use --new-flag "
                 "instead.\n  --new-flag NEW_FLAG   The new one.\n")
    report = C.check_serve_flags(["--old_flag", "x"], parse_serve_help(help_text, "0.30.0"))
    assert report.ok
    assert report.lines() == ["--old-flag: deprecated in vLLM 0.30.0 (renamed --new-flag)"]


def test_summary_is_undecided_not_ok() -> None:
    report = C.check_serve_flags(["--port"], parse_serve_help(text("vllm-grouped-summary-help.txt")))
    assert report.undecided and not report.ok
    assert "--help=all" in report.message()


@pytest.mark.parametrize("name", sorted(p.name for p in HELP.glob("*.txt")))
def test_every_fixture_reads(name: str) -> None:
    h = parse_serve_help(text(name))
    assert h.summary or h.options


def test_commands_for_a_candidate_image() -> None:
    cfg = config()
    assert C.check_recipe(cfg, parse_serve_help("")).undecided
    assert image_version_argv(cfg, "vllm:new") == ["docker", "run", "--rm", "--network", "none",
                                                   "--entrypoint", "vllm", "vllm:new", "--version"]
    helps = image_help_argvs(cfg, "vllm:new")
    assert [a[-3:] for a in helps] == [["vllm:new", "serve", "--help=all"], ["vllm:new", "serve", "--help"]]


def test_read_help_keeps_the_first_full_answer() -> None:
    summary, full = text("vllm-grouped-summary-help.txt"), text("vllm-0.22-serve-help-all.txt")
    assert read_help([(True, full), (True, summary)], "0.22.0").accepts("--grpc")
    # vLLM < 0.10 refuses --help=all: the plain --help is the full one
    old = read_help([(False, ""), (True, text("vllm-0.8-serve-help.txt"))])
    assert old.accepts("-O") and not old.summary
    assert read_help([(False, ""), (True, summary)]).summary
    assert not read_help([(False, ""), (False, "")]).flags


def test_metavar_pieces_are_no_spellings() -> None:
    h = parse_serve_help("options:\n  --pair A, B          Two values.\n  -x, --ex             X.\n")
    assert h.accepts("--pair") and not h.accepts("B") and h.option("-x") is h.option("--ex")


def test_the_word_deprecated_alone_does_not_deprecate() -> None:
    h = parse_serve_help(
        "options:\n"
        "  --allow-deprecated-quantization, --no-allow-deprecated-quantization\n"
        "                        Whether to allow deprecated quantization methods. (default: False)\n"
        "  --old OLD             Sets old. This flag is deprecated and will be removed; use --new.\n"
        "  --older               Deprecated: has no effect.\n")
    assert set(h.deprecations()) == {"--old", "--older"}
    old = h.deprecations()["--old"]
    assert old.deprecation_note == "This flag is deprecated and will be removed; use --new."
    assert old.replacement == "--new"
