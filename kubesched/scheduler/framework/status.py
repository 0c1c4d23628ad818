"""Plugin results: a code, the reasons behind it and the plugin that gave it (upstream ``fwk.Status``).

``None`` stands for success everywhere a Status is returned, as a nil ``*Status`` does upstream;
``is_success`` accepts both.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TypeGuard


class Code(IntEnum):
    Success = 0
    Error = 1
    Unschedulable = 2
    UnschedulableAndUnresolvable = 3
    Wait = 4
    Skip = 5
    Pending = 6


_REJECTED = (Code.Unschedulable, Code.UnschedulableAndUnresolvable, Code.Pending)


class Status:
    """What a plugin said. ``reasons`` are the messages users read in FitErrors and events."""

    __slots__ = ("code", "error", "plugin", "reasons")

    def __init__(self, code: Code = Code.Success, *reasons: str, plugin: str = "", error: BaseException | None = None):
        self.code = code
        self.reasons: list[str] = list(reasons)
        self.plugin = plugin
        self.error = error

    @classmethod
    def from_error(cls, error: BaseException, plugin: str = "") -> Status:
        """``fwk.AsStatus``: an Error status carrying the exception."""
        return cls(Code.Error, str(error), plugin=plugin, error=error)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        self.plugin = plugin
        return self

    def is_success(self) -> bool:
        return self.code == Code.Success

    def is_rejected(self) -> bool:
        return self.code in _REJECTED

    def is_wait(self) -> bool:
        return self.code == Code.Wait

    def as_error(self) -> BaseException | None:
        if self.code == Code.Success:
            return None
        if self.error is not None:
            return self.error
        return StatusError(self)

    def copy(self) -> Status:
        return Status(self.code, *self.reasons, plugin=self.plugin, error=self.error)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return self.code == other.code and self.reasons == other.reasons and self.plugin == other.plugin

    def __hash__(self) -> int:
        return hash((self.code, tuple(self.reasons), self.plugin))

    def __repr__(self) -> str:
        plugin = f", plugin={self.plugin!r}" if self.plugin else ""
        return f"Status({self.code.name}, {self.reasons!r}{plugin})"


class StatusError(Exception):
    """A non-success Status raised as an exception (``Status.AsError``)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def is_success(status: Status | None) -> bool:
    """Upstream ``Status.IsSuccess``: a nil status is a success."""
    return status is None or status.code == Code.Success


def failed(status: Status | None) -> TypeGuard[Status]:
    """``not is_success(status)``, written so that a type checker knows a failed status is not None."""
    return status is not None and status.code != Code.Success

