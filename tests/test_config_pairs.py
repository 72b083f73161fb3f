"""The config pairs the stage machine reads, found by one ``str.find`` per key (rules.config_pairs): the
same pairs, in the same order, as CONFIG_PAIR parsing every pair of the line, on every config line
(``str(VllmConfig)``, ``Namespace(...)``) of the real logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.domain.logs.rules import CONFIG_PAIR, config_pairs
from sparktui.domain.logs.stages import _PAIR_KEYS

TESTS = Path(__file__).resolve().parent
LOGS = sorted([*(TESTS / "data" / "vllm-logs").glob("*.txt"), *(TESTS / "public_logs").glob("*.log")])


def _lines(marker: str) -> list[str]:
    return [line for path in LOGS for line in path.read_text(errors="replace").splitlines() if marker in line]


def test_the_corpus_has_config_and_args_lines() -> None:
    assert len(_lines("with config: ")) >= 20 and len(_lines("Namespace(")) >= 3


@pytest.mark.parametrize("line", _lines("with config: ") + _lines("Namespace("), ids=lambda s: s[:40])
def test_config_pairs_are_the_regexs_pairs_of_the_wanted_keys(line: str) -> None:
    want = [(k, v) for k, v in CONFIG_PAIR.findall(line) if k in _PAIR_KEYS]
    assert config_pairs(line, _PAIR_KEYS) == want


def test_a_key_is_a_whole_key() -> None:
    text = "draft_model='d', x.dtype=a, model='m', dtype=torch.float16, max_seq_len=, tensor_parallel_size=2)"
    assert config_pairs(text, _PAIR_KEYS) == [("model", "'m'"), ("dtype", "torch.float16"),
                                              ("tensor_parallel_size", "2")]
