"""The JSON object a script run on a node reports as its last line (the node-side scripts of
``sparktui.node`` print one): a leaf module, so that both the lifecycle and the model-file readers below it
can read such reports."""

from __future__ import annotations

import json
from typing import Any


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object; ``None`` when there is none.

    The scripts print their report last; anything before it (a sitecustomize's notice, a warning from
    the node's Python) is passed over.
    """
    for line in reversed(text.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None
