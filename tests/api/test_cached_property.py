"""``kubesched.utils.cached.cached_property`` behaves as ``functools.cached_property``: computed
on first read, then read from the instance (no call), replaceable and deletable per instance."""

from __future__ import annotations

from kubesched.utils.cached import cached_property


class Counted:
    def __init__(self) -> None:
        self.calls = 0

    @cached_property
    def value(self) -> int:
        """The number of computations so far."""
        self.calls += 1
        return self.calls


def test_computed_once_per_instance():
    a, b = Counted(), Counted()
    assert (a.value, a.value, b.value) == (1, 1, 1)
    assert a.calls == 1 and a.__dict__["value"] == 1


def test_deleting_the_value_computes_it_again():
    a = Counted()
    assert a.value == 1
    del a.value
    assert a.value == 2


def test_the_class_attribute_is_the_descriptor_with_its_docstring():
    assert isinstance(Counted.value, cached_property)
    assert Counted.value.__doc__ == "The number of computations so far."
