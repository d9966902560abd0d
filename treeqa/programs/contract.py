"""What every program declares about itself, so the rest of the package needs nothing but the
class: its name (setting `name` registers it), its settings and presets, whether it searches a
corpus, the most LM calls one question can take, whether it sends one question's calls
concurrently, the shape of its search tree and the demos the training annotations give it.

The settings are read off the constructor (name, type, default) into a pydantic model, so
the command line's `--param`, a compiled file and `--plan` check and resolve them alike.
"""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import Any, ClassVar

import dspy
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, create_model

from treeqa.lm.adapter import attach, recorded_adapter
from treeqa.registry import Registry

NOT_SETTINGS = ("self", "retriever", "embed_fn")  # constructor arguments that are objects, not settings
DEPLOYMENT_SETTINGS = ("threads",)  # how a program runs on this machine, not what it computes
SETTINGS_STATE_KEY = "treeqa_settings"  # where a program's settings travel in DSPy's saved state


def _counts(hint: Any) -> bool:
    """Whether a setting's type is a number (or numbers) and never a boolean: `k: int`,
    `widths: tuple[int, ...]`, `threshold: float | None`."""
    args = typing.get_args(hint)
    if hint is bool or bool in args:
        return False
    return hint in (int, float) or any(_counts(arg) for arg in args)


def _no_bool(value: Any) -> Any:
    """pydantic takes True for 1 in a number field: `--param k=true` would silently be k=1."""
    if isinstance(value, bool) or (isinstance(value, (list, tuple)) and any(isinstance(v, bool) for v in value)):
        raise ValueError("a number is needed, not true or false")
    return value


def _same_class(old: type, new: type) -> bool:
    """The same class defined again (its module reloaded): it replaces itself."""
    return (old.__module__, old.__qualname__) == (new.__module__, new.__qualname__)


# name -> class, filled as program classes are defined
REGISTRY: Registry[type[QAProgram]] = Registry("program", same=_same_class)


class QAProgram(dspy.Module):
    """Base of every program: a `dspy.Module` called as `program(question=...)`.

    Subclasses set `name` (the command line's name for it; a class with a name is registered
    when it is defined, so a program is one file), `retrieves` and `concurrent`, and implement
    `call_bound`. Their constructor arguments (except the retriever and embedding function) are
    their settings, kept as attributes of the same names, so `settings` can report them.
    """

    name: ClassVar[str | None] = None  # what `--program` calls it; None: not registered (a base class)

    retrieves: ClassVar[bool] = False  # searches a corpus: an index is needed
    concurrent: ClassVar[bool] = False  # with threads > 1, sends one question's calls together
    # settings a compiler fits and DSPy's `load` restores onto a built program (plain values the
    # program reads at question time); any other setting must already match the saved one
    fitted_settings: ClassVar[tuple[str, ...]] = ()
    reader: ClassVar[str | None] = None  # the predictor whose output is the answer (compiled on recorded reads)
    # the predictor whose output is the next search query (compiled against retrieval by `--optimizer
    # query`); a program that declares one also has `completion_inputs`, `completion_queries`,
    # `search_below` and `expansion_width`, which say how it makes and runs those queries
    query_writer: ClassVar[str | None] = None
    # what `optimize` compiles with when no --optimizer / --train is given: the compile that
    # measured best for the program (DSPy's BootstrapFewShot where nothing else was measured)
    default_compile: ClassVar[dict[str, Any]] = {"optimizer": "bootstrap", "train": 20}
    # the shape of its search tree, which decides the decision figures that apply (`treeqa.evaluation.decisions`):
    # "reviews" (a tree of reviewed paragraphs), "chain" (one reviewed path), "states" (a beam of scored states)
    tree_shape: ClassVar[str | None] = None
    default_preset: ClassVar[str | None] = None  # the preset side-by-side comparisons run it with
    presets: ClassVar[dict[str, dict[str, Any]]] = {}  # named settings, e.g. a paper's per dataset
    # predictor name -> the kind of demo the training annotations can give it (`treeqa.teleprompt.annotated_demos`:
    # "review", "complete", "ask", "score", "summarize", "background", "read", "read-history");
    # a predictor not named gets no annotated demos
    annotation_demos: ClassVar[dict[str, str]] = {}
    # the reading settings under which its reader reads in rta's prompt, which the trained reader
    # (`--optimizer trained-reader`, an adapter trained on rta's reads) was trained on; None: it
    # has no such reading, and no trained reader fits it
    trained_reading: ClassVar[dict[str, Any] | None] = None
    _settings_models: ClassVar[dict[type, type[BaseModel]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if name is None:
            return
        if not isinstance(name, str) or not name or "," in name or name != name.strip():
            raise ValueError(f"{cls.__name__}.name must be a non-empty word, got {name!r}")
        REGISTRY.register(name, cls)  # another class's name refused; the same class defined again replaces itself

    @classmethod
    def settings_model(cls) -> type[BaseModel]:
        """The settings as a pydantic model: unknown names are refused, values converted."""
        if cls not in QAProgram._settings_models:
            hints = typing.get_type_hints(cls.__init__)
            fields = {}
            for param in inspect.signature(cls.__init__).parameters.values():
                if param.name in NOT_SETTINGS or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                    continue
                hint = hints.get(param.name, Any)
                if _counts(hint):
                    hint = typing.Annotated[hint, BeforeValidator(_no_bool)]
                fields[param.name] = (hint, param.default)
            QAProgram._settings_models[cls] = create_model(
                f"{cls.__name__}Settings", __config__=ConfigDict(extra="forbid"), **fields)
        return QAProgram._settings_models[cls]

    @classmethod
    def check_settings(cls, params: dict[str, Any] | None, name: str | None = None) -> dict[str, Any]:
        """The given settings, type-checked and converted ("no" -> False, "2" -> 2), without
        defaults added; one line per bad value, naming the setting, what it needs and what it got.
        Keys starting with "_" are bookkeeping (e.g. "_compiled") and pass unchecked."""
        name = name or cls.__name__
        params = {k: v for k, v in (params or {}).items() if not k.startswith("_")}
        model = cls.settings_model()
        try:
            checked = model.model_validate(params)
        except ValidationError as exc:
            lines = []
            for err in exc.errors():
                key = ".".join(str(part) for part in err["loc"]) or "?"
                if err["type"] == "extra_forbidden":
                    lines.append(f"{key}: not a setting of {name} (settings: {', '.join(model.model_fields)})")
                else:
                    lines.append(f"{key}: {err['msg'].lower()} (given: {err.get('input')!r})")
            raise ValueError(f"bad settings for {name}:\n  " + "\n  ".join(lines)) from None
        return checked.model_dump(exclude_unset=True)

    @classmethod
    def resolve_settings(cls, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every setting: the given ones checked, the rest at their defaults."""
        return cls.settings_model().model_validate(cls.check_settings(params)).model_dump()

    @classmethod
    def needs_retriever(cls, settings: dict[str, Any]) -> bool:
        """Whether the program with these (resolved) settings searches a corpus."""
        return cls.retrieves

    @classmethod
    def call_bound(cls, settings: dict[str, Any]) -> int:
        """The most LM calls one question can take with these (resolved) settings, DSPy's own
        retries of an unparseable reply not counted."""
        raise NotImplementedError(f"{cls.__name__} does not declare its call bound")

    @classmethod
    def no_query_writer(cls, settings: dict[str, Any]) -> str | None:
        """Why no predictor writes this program's search queries with these (resolved) settings,
        as "<program> ..." continues; None where `query_writer` does."""
        return None if cls.query_writer else "declares no query writer"

    @classmethod
    def settings_space(cls) -> dict[str, tuple]:
        """Settings worth trying when compiling (`--optimizer settings`), each with its values;
        empty for a program with nothing to tune."""
        return {}

    @property
    def settings(self) -> dict[str, Any]:
        """The settings this instance runs with (every one, defaults included)."""
        return {name: getattr(self, name) for name in self.settings_model().model_fields}

    @property
    def method_settings(self) -> dict[str, Any]:
        """The settings that decide what the program computes (`settings` less the deployment
        ones such as threads): what compiled files and search trees record."""
        return {k: v for k, v in self.settings.items() if k not in DEPLOYMENT_SETTINGS}

    # --- DSPy's own save/load carry the settings too -------------------------------------------

    def dump_state(self, json_mode=True):
        """DSPy's state (each predictor's demos and instructions) plus this program's settings,
        so `program.save(path)` and DSPy's `Module.load(path)` keep what compiling chose (a path
        judge, a threshold) and not only the demos."""
        state = super().dump_state(json_mode=json_mode)
        state[SETTINGS_STATE_KEY] = self.method_settings
        return state

    def load_state(self, state, **kwargs):
        """Load DSPy's state and the saved settings: fitted settings (`fitted_settings`) are
        restored; any other saved setting that differs from this instance's is an error naming
        it, not silently ignored. A treeqa compiled file (its "treeqa" section) counts too."""
        saved = state.get(SETTINGS_STATE_KEY)
        recipe = state.get("treeqa")
        if saved is None and isinstance(recipe, dict) and isinstance(recipe.get("settings"), dict):
            saved = recipe["settings"]
        restore = self._settings_to_restore(saved) if saved is not None else {}
        predictors = {k: v for k, v in state.items() if k not in (SETTINGS_STATE_KEY, "treeqa")}
        names = {name: p.signature.__name__ for name, p in self.named_predictors()}
        out = super().load_state(predictors, **kwargs)
        for name, predictor in self.named_predictors():
            # DSPy rebuilds a loaded signature as a class named "StringSignature"; runs count parse
            # attempts by signature name, so the loaded one keeps the name it had
            if name in names and predictor.signature.__name__ != names[name]:
                predictor.signature.__name__ = predictor.signature.__qualname__ = names[name]
        for name, value in restore.items():
            setattr(self, name, value)
        return out

    def load(self, path, *args, **kwargs):
        """DSPy's `load`, reading a JSON file as `load_program` does: a saved state is untrusted
        input, so of each predictor only its instructions, field texts and (at most 32) demos are
        taken, never an `lm` or `config` that would choose where prompts and keys are sent. A
        treeqa compiled file's LoRA adapter is checked (record, then tensors against the base
        model) and the predictors it was trained for answer through it. Pickles stay DSPy's
        (it refuses them unless `allow_pickle=True`)."""
        if Path(path).suffix != ".json":
            return super().load(path, *args, **kwargs)
        # late: treeqa.programs.compiled builds programs, whose classes this module defines
        from treeqa.programs.compiled import CompiledProgramError, read_state, trusted_state

        state = read_state(path)
        if not isinstance(state, dict):
            raise CompiledProgramError(f"{path}: a saved program is a JSON object")
        recipe = state.get("treeqa")
        found = recorded_adapter(recipe, Path(path).parent, str(path)) if isinstance(recipe, dict) else None
        kept = trusted_state(self, state, path)
        for key in (SETTINGS_STATE_KEY, "treeqa"):  # the settings, checked by load_state
            if isinstance(state.get(key), dict):
                kept[key] = state[key] if key == SETTINGS_STATE_KEY else {"settings": state[key].get("settings")}
        self.load_state(kept)
        if found is not None:
            attach(self, *found, where=str(path))
        return self

    def _settings_to_restore(self, saved: dict[str, Any]) -> dict[str, Any]:
        name = type(self).__name__
        checked = type(self).check_settings({k: v for k, v in saved.items() if k not in DEPLOYMENT_SETTINGS}, name)
        mine = self.method_settings
        clashes = [f"{k}={v!r} (this {name} has {mine[k]!r})" for k, v in checked.items()
                   if k not in self.fitted_settings and k in mine and _plain(v) != _plain(mine[k])]
        if clashes:
            raise ValueError(f"the saved state was made by a {name} with other settings: {'; '.join(clashes)}. "
                             f"Build the program with those settings, or load the file with "
                             f"treeqa.programs.compiled.load_program, which does")
        restore = {k: v for k, v in checked.items() if k in self.fitted_settings}
        self.check_fitted({**{k: mine.get(k) for k in self.fitted_settings}, **restore})
        return restore

    def check_fitted(self, fitted: dict[str, Any]) -> None:
        """Refuse fitted settings that cannot go together (a program with some overrides this)."""


def _plain(value: Any) -> Any:
    """Lists and tuples alike (a JSON round trip turns one into the other)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
