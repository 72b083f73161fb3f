"""Node-side scripts: standard-library Python (3.8+) that runs on the nodes, never imported there.

Each script is a real module here (linted, type-checked, tested by running it) and reaches a node as
text: ``[python, "-c", source("tagged"), arg1, …]`` (python puts "-c" in argv[0]). A script shares a
helper by importing it from this package (``from sparktui.node.ours import ours``); ``source`` puts the
helper's text in place of that line, so the node needs nothing of sparktui. A script of several modules
is a subpackage (``sparktui/node/probe/``, the telemetry probe): ``source("probe.main")`` is its one
script. Every config value arrives as a positional argument; no script text ever contains one.

Nothing here imports the rest of sparktui (an import-linter contract): the package stands alone.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

#: A helper imported from this package: replaced by the helper's text in the shipped source.
_HELPER = re.compile(r"^from sparktui\.node\.(\w+(?:\.\w+)*) import [^\n]*$", re.M)
_FUTURE = "from __future__ import annotations\n"


def _text(name: str) -> str:
    *package, module = name.split(".")
    return resources.files(__name__).joinpath(*package, module + ".py").read_text(encoding="utf-8")


@functools.cache
def source(name: str) -> str:
    """The text that ``python -c`` runs on the node for script ``name`` (``sparktui/node/<name>.py``; a dot
    names a subpackage's module), its helpers inlined once each; the one ``__future__`` import first, where
    Python requires it."""
    seen: set[str] = set()

    def inline(module: str) -> str:
        def helper(m: re.Match[str]) -> str:
            if m.group(1) in seen:
                return ""
            seen.add(m.group(1))
            return inline(m.group(1))

        return _HELPER.sub(helper, _text(module).replace(_FUTURE, ""))

    return _FUTURE + inline(name)
