"""The startup rules' events are one enum, and the stage machine has a handler for each: the events it takes
before its table (facts only, a stop, ``--enforce-eager``'s skip) and the table's cover every event once."""

from __future__ import annotations

from sparktui.domain.logs.rules import RULES, RuleEvent
from sparktui.domain.logs.stages import STAGE_EVENT_HANDLERS


def test_every_rule_event_is_one_of_the_enum_and_every_event_is_used() -> None:
    assert all(isinstance(rule.event, RuleEvent) for rule in RULES)
    assert {rule.event for rule in RULES} == set(RuleEvent)


def test_every_event_has_one_handler() -> None:
    taken_first = {RuleEvent.FACT, RuleEvent.STOPPED, RuleEvent.SKIP}
    assert set(RuleEvent) - set(STAGE_EVENT_HANDLERS) == taken_first
    assert not taken_first & set(STAGE_EVENT_HANDLERS)


def test_an_event_is_its_name_in_the_rules_table() -> None:
    """A ``StrEnum``: the names the rules' docstring and vLLM's reference use are the values."""
    assert RuleEvent.NODE_DONE == "node_done" and str(RuleEvent.UVICORN_URL) == "uvicorn_url"
