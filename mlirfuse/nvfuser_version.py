"""nvFuser's `nvfuser_version.Version`, for programs written against nvFuser: a version
string that compares as a version with strings and other versions."""

from __future__ import annotations

from typing import Any


class Version(str):
    """'0.1.0' compared by its numeric parts: Version('0.10.0') > '0.9.1'."""

    def _parts(self) -> tuple[int, ...]:
        return _parts(self)

    def __lt__(self, other: Any) -> bool:
        return _parts(self) < _parts(other)

    def __le__(self, other: Any) -> bool:
        return _parts(self) <= _parts(other)

    def __gt__(self, other: Any) -> bool:
        return _parts(self) > _parts(other)

    def __ge__(self, other: Any) -> bool:
        return _parts(self) >= _parts(other)

    def __eq__(self, other: Any) -> bool:
        return _parts(self) == _parts(other)

    def __ne__(self, other: Any) -> bool:
        return not self == other

    __hash__ = str.__hash__


def _parts(text: Any) -> tuple[int, ...]:
    parts = []
    for piece in str(text).split("+")[0].split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)
