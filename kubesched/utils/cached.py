"""``cached_property`` without the lock: CPython 3.11's ``functools.cached_property`` takes an
``RLock`` on every first access of every instance (3.12 dropped it, as it serialised all instances
of a class). kubesched's cached properties are pure functions of an object read by one thread, and
the scheduler builds thousands of pod views a second, each computing a few: the lock cost more
than most of the values it guarded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Self, TypeVar, overload

T = TypeVar("T")


class cached_property(Generic[T]):
    """A property computed once per instance and then kept in the instance's ``__dict__`` (later
    reads find it there without calling the descriptor), as ``functools.cached_property``."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.attrname = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attrname = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object, owner: type | None = None) -> T | Self:
        if instance is None:
            return self
        value = instance.__dict__[self.attrname] = self.func(instance)
        return value
