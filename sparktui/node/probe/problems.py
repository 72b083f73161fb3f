"""Problems: a value that cannot be read is null, and its reason is said once."""

from __future__ import annotations

import errno


class Problems:
    """Reasons for values that are null, each said once; a value that reads again is said resolved once."""

    def __init__(self) -> None:
        self.said: dict[str, str] = {}
        self._new: dict[str, str] = {}
        self._resolved: set[str] = set()

    def note(self, path: str, reason: str) -> None:
        if self.said.get(path) != reason:
            self.said[path] = reason
            self._new[path] = reason
            self._resolved.discard(path)

    def clear(self, path: str) -> None:
        if path in self.said:
            del self.said[path]
            self._new.pop(path, None)
            self._resolved.add(path)

    def drain(self) -> tuple[dict[str, str], list[str]]:
        out, self._new = self._new, {}
        resolved, self._resolved = sorted(self._resolved), set()
        return out, resolved


def why_failed(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{errno.errorcode.get(exc.errno, exc.errno)}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"
