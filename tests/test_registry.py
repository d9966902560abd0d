"""The one registry every kind of named thing uses (programs, compilers, retrievers, datasets)."""

import pytest

from treeqa.registry import Registry


def _fruit() -> Registry:
    fruit = Registry("fruit")
    fruit.register("apple", "red")
    fruit.register("pear", "green")
    return fruit


def test_a_registry_reads_as_a_mapping_in_the_order_registered():
    fruit = _fruit()
    assert list(fruit) == ["apple", "pear"] and len(fruit) == 2 and dict(fruit) == {"apple": "red", "pear": "green"}
    assert "apple" in fruit and "plum" not in fruit and fruit.get("plum") is None and fruit["pear"] == "green"


def test_a_name_held_by_another_thing_is_refused():
    fruit = _fruit()
    with pytest.raises(ValueError, match="fruit name 'apple' is taken by 'red'"):
        fruit.register("apple", "green")
    assert fruit["apple"] == "red"


def test_the_same_thing_registered_again_is_fine():
    fruit, thing = Registry("fruit"), object()
    assert fruit.register("box", thing) is thing
    assert fruit.register("box", thing) is thing and list(fruit) == ["box"]


def test_what_counts_as_the_same_thing_can_be_widened():
    """Programs: the same class defined again (its module reloaded) replaces itself."""
    words = Registry("word", same=lambda old, new: old.lower() == new.lower())
    words.register("w", "Hello")
    words.register("w", "HELLO")
    assert words["w"] == "HELLO"
    with pytest.raises(ValueError, match="is taken"):
        words.register("w", "bye")


def test_an_unknown_name_is_an_error_naming_every_choice():
    fruit = _fruit()
    with pytest.raises(ValueError, match=r"^unknown fruit 'plum'; choose one of apple, pear$"):
        fruit.lookup("plum")
    with pytest.raises(KeyError) as caught:
        fruit["plum"]
    assert str(caught.value) == "unknown fruit 'plum'; choose one of apple, pear"  # plain text, not a repr
    assert fruit.lookup("apple") == "red"


def test_the_lookup_error_is_the_registrys_own():
    class Missing(ValueError):
        pass

    with pytest.raises(Missing, match="unknown thing 'x'"):
        Registry("thing", error=Missing).lookup("x")


def test_an_empty_name_is_refused_and_unregister_forgets():
    fruit = _fruit()
    with pytest.raises(ValueError, match="non-empty name"):
        fruit.register("", "x")
    assert fruit.unregister("apple") == "red" and fruit.unregister("apple") is None and list(fruit) == ["pear"]


def test_a_view_is_read_only_and_live():
    fruit = _fruit()
    colours = fruit.view(str.upper)
    assert dict(colours) == {"apple": "RED", "pear": "GREEN"}
    fruit.register("plum", "purple")
    assert colours["plum"] == "PURPLE" and list(colours) == ["apple", "pear", "plum"]
    assert not hasattr(colours, "__setitem__")
    with pytest.raises(KeyError, match="choose one of apple, pear, plum"):
        colours["fig"]
