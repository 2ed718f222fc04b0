"""Plain record classes: what a shepherd's modules use instead of dataclasses.

A shepherd lives as long as its run and a busy machine has a hundred of them: the `dataclasses`
module costs each about 1 MB of private memory (it imports inspect, ast, dis and tokenize). A
class on the shepherd's import path therefore writes its own `__init__`, names its fields in
`__slots__`, and takes from one of these bases what a dataclass would have given it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Record:
    """Equal to a record of the same class whose fields (its `__slots__`) are equal, shown as
    `Name(field=value, …)`, never hashable (Python sets `__hash__` to None beside `__eq__`):
    a dataclass's behaviour."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class Frozen(Record):
    """A Record that cannot change once `__init__` has set its fields (through `_init`), and is
    hashable by them: a frozen dataclass's behaviour."""

    __slots__ = ()

    def _init(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} cannot change: its {name} was set once")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} cannot change: its {name} was set once")

    def __hash__(self) -> int:
        return hash(self._values())
