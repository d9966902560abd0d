"""One way to keep things by name: programs, compilers, retrievers and datasets each have a
`Registry`, filled as their modules are imported and read as a mapping everywhere else.

A name is taken once: registering another thing under it is an error naming what holds it
(the same thing registered again, e.g. a module imported twice, is not). Looking up a name
that is not there with `lookup` is an error naming every choice.

Every registry is filled by one rule, `discover`: import each module of the package that holds
its kind, then the modules the kind's plugin variable (`TREEQA_PROGRAMS`, `TREEQA_COMPILERS`,
`TREEQA_RETRIEVERS`, `TREEQA_DATASETS`) names; a module registers what it defines as it is
imported. This module is the lowest layer of the package: it imports only the settings.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from treeqa.settings import plugin_modules

T = TypeVar("T")
V = TypeVar("V")


def discover(kind: str, package: str, plugins: list[str] | None = None) -> None:
    """Import every module of `package` (its own entries of `kind`), then the modules
    `TREEQA_<KIND>` names (entries kept outside treeqa), or `plugins` where given. A module
    already imported is not run again, so calling this twice only adds what was named since."""
    found = importlib.import_module(package)
    for info in pkgutil.iter_modules(found.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")
    variable = f"TREEQA_{kind.upper()}"
    for module in plugin_modules(kind) if plugins is None else plugins:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(f"{variable} names {module!r}, which cannot be imported: {exc}") from exc


class UnknownName(KeyError):
    """A name no registry entry has; its message names the choices (and reads as plain text,
    not as a KeyError's quoted repr)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _describe(item: Any) -> str:
    module, qualname = getattr(item, "__module__", None), getattr(item, "__qualname__", None)
    return f"{module}.{qualname}" if module and qualname else repr(item)


class Registry(Mapping[str, T], Generic[T]):
    """Things of one kind by name, in the order registered.

    Args:
        kind: what one thing is called in messages ("program", "optimizer", "dataset").
        error: the exception `lookup` raises for an unknown name (default ValueError).
        same: (registered, new) -> whether `new` is the registered thing again, so registering
            it replaces the old one instead of being refused (default: the very same object).
    """

    def __init__(self, kind: str, error: Callable[[str], Exception] = ValueError,
                 same: Callable[[T, T], bool] | None = None):
        self.kind = kind
        self._error = error
        self._same = same or (lambda old, new: old is new)
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        """Keep `item` under `name`; a name held by something else is refused. Returns `item`."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a non-empty name, got {name!r}")
        taken = self._items.get(name)
        if taken is not None and not self._same(taken, item):
            raise ValueError(f"{self.kind} name {name!r} is taken by {_describe(taken)}")
        self._items[name] = item
        return item

    def unregister(self, name: str) -> T | None:
        """Forget `name` (a test's temporary entry); what it held, or None."""
        return self._items.pop(name, None)

    def choices(self) -> str:
        """Every name, comma-separated, as the error for an unknown one lists them."""
        return ", ".join(self._items)

    def unknown(self, name: object) -> str:
        """The message for a name not registered."""
        return f"unknown {self.kind} {name!r}; choose one of {self.choices()}"

    def lookup(self, name: str) -> T:
        """The thing named `name`; an unknown name raises `error` naming every choice."""
        if name not in self._items:
            raise self._error(self.unknown(name))
        return self._items[name]

    def view(self, part: Callable[[T], V]) -> Mapping[str, V]:
        """A read-only, live mapping of each name to `part` of its thing (e.g. a dataset's splits)."""
        return _View(self, part)

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownName(self.unknown(name)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {self.choices()})"


class _View(Mapping[str, V]):
    def __init__(self, registry: Registry, part: Callable[[Any], V]):
        self._registry, self._part = registry, part

    def __getitem__(self, name: str) -> V:
        return self._part(self._registry[name])

    def __contains__(self, name: object) -> bool:
        return name in self._registry

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry)

    def __len__(self) -> int:
        return len(self._registry)

    def __repr__(self) -> str:
        return repr(dict(self))
