"""The package's shape: no import circle between the modules of the package, the benchmarks and
`optimize.py`, and no module outside `treeqa/programs/` naming a program (what a program's kind
decides, the program declares). The tests' shape: a test module imports shared helpers from
`tests.fakes` (and its modules) alone."""

import ast
import re
from pathlib import Path

import treeqa

ROOT = Path(treeqa.__file__).parent
TESTS = Path(__file__).parent
CHECKOUT = ROOT.parent


def _modules(package: Path = ROOT) -> dict[str, Path]:
    """Module name -> file of every module of `package` (its `__init__.py` named as the package)."""
    out = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _scripts(folder: Path, prefix: str) -> dict[str, Path]:
    """Scripts run by path (`python benchmarks/record.py`), named `prefix.script`; they import each
    other by their bare names, as the folder is on their path."""
    return {f"{prefix}.{path.stem}" if prefix else path.stem: path for path in folder.glob("*.py")}


def _from_module(node: ast.ImportFrom, name: str, path: Path) -> str:
    """The module a `from ... import` names, a relative one resolved from `name`'s package."""
    if not node.level:
        return node.module or ""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _import_nodes(tree: ast.AST, top_level: bool = False):
    """Every import statement of `tree`; with `top_level`, those run when the module is imported
    (not inside a function)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif not (top_level and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)):
            yield from _import_nodes(node, top_level)


def _imports(path: Path, modules: dict[str, Path], name: str | None = None, top_level: bool = False) -> set[str]:
    """The modules among `modules` that `path` (the module `name`) imports, at the top or inside
    functions (a lazy import is still a dependency), relative imports resolved. `from package
    import name` counts the submodule when `name` is one, else the package itself; a script's bare
    `import sibling` counts its sibling script; a package that imports every module of its own
    folder (the registries' discovery, handed the package's `__path__`) depends on each."""
    name = name or next(n for n, p in modules.items() if p == path)
    source = path.read_text()
    script = not (path.parent / "__init__.py").is_file()
    siblings = name.rpartition(".")[0]

    def named(module: str) -> str:  # a script's `import sibling` is its sibling script
        sibling = f"{siblings}.{module}" if siblings else module
        return sibling if script and module not in modules and sibling in modules else module

    found = set()
    for node in _import_nodes(ast.parse(source), top_level):
        if isinstance(node, ast.Import):
            found |= {named(a.name) for a in node.names}
        else:
            module = named(_from_module(node, name, path))
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in modules else module)
    if path.name == "__init__.py" and re.search(r"\b__path__\b", source):
        found |= {m for m, p in modules.items() if p.parent == path.parent and p != path}
    return {m for m in found if m in modules and m != name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle found by a depth-first walk, as the path that closes it."""
    cycles = []

    def visit(node, stack, on_stack, done):
        on_stack.add(node)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_stack:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in done:
                visit(nxt, stack, on_stack, done)
        stack.pop()
        on_stack.discard(node)
        done.add(node)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [], set(), done)
    return cycles


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {name: _imports(path, modules, name) for name, path in modules.items()}


# Imports that close a circle and are left so on purpose, each inside a function: the module
# imported is whole by the time the function runs, so the circle is never walked at import time.
KNOWN_EDGES = {
    # the LM door (treeqa.lm) is read at call time, where tests and apps replace the engine
    # (`treeqa.lm.local_engine`) and the base model's hash; the door imports these modules lazily
    ("treeqa.lm.provider", "treeqa.lm"),
    ("treeqa.lm.adapter", "treeqa.lm"),
    # a compiled file's program is built through the registry, which `treeqa.programs` fills by
    # importing each module of its folder, the compiled package among them
    ("treeqa.programs.compiled.program", "treeqa.programs"),
}


def test_no_import_circle_between_modules():
    """Between the package's modules (its packages' `__init__` included: a circle through one is
    a circle), the benchmark scripts and `optimize.py`, but for the known edges above."""
    modules = {**_modules(), **_scripts(CHECKOUT / "benchmarks", "benchmarks"), **_scripts(CHECKOUT, "")}
    modules = {name: path for name, path in modules.items() if path.name != "setup.py"}
    graph = import_graph(modules)
    stale = sorted(f"{a} -> {b}" for a, b in KNOWN_EDGES if b not in graph.get(a, set()))
    assert stale == [], f"known edges no longer there (drop them from KNOWN_EDGES): {stale}"
    at_import = sorted(f"{a} -> {b}" for a, b in KNOWN_EDGES if b in _imports(modules[a], modules, a, top_level=True))
    assert at_import == [], f"known edges must stay inside functions: {at_import}"
    for a, b in KNOWN_EDGES:
        graph[a].discard(b)
    assert {"benchmarks.record", "benchmarks.results_page", "optimize", "treeqa.programs"} <= set(graph)
    assert "treeqa.cli" in graph["optimize"]
    cycles = _circles(graph)
    assert cycles == [], " ; ".join(" -> ".join(c) for c in cycles)


def test_benchmarks_import_no_test_code():
    """A benchmark is a tool a reader runs from a checkout or an installed package: what it needs
    from the tests' doubles it has of its own (`benchmarks/servers.py`)."""
    offenders = []
    for path in sorted([*(CHECKOUT / "benchmarks").glob("*.py"), CHECKOUT / "optimize.py"]):
        for node in _import_nodes(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            offenders += [f"{path.relative_to(CHECKOUT)}:{node.lineno} {n}" for n in names
                          if n == "tests" or n.startswith("tests.")]
    assert offenders == []


PLANTED = {  # packages whose __init__ closes a circle (by name, by discovery), relative imports, scripts
    "pkg/__init__.py": "from pkg.first import run\nHELPER = 1\n",
    "pkg/first.py": "def run():\n    from pkg import HELPER\n    return HELPER\n",
    "pkg/second.py": "from . import third\n",
    "pkg/third.py": "def f():\n    from .second import x\n",
    "pkg/fourth.py": "from .sub import deep\n",
    "pkg/sub/__init__.py": "",
    "pkg/sub/deep.py": "from ..fourth import y\n",
    "found/__init__.py": "import importlib, pkgutil\nfor m in pkgutil.iter_modules(__path__):\n"
                         "    importlib.import_module(f'found.{m.name}')\nTABLE = {}\n",
    "found/entry.py": "def add():\n    from found import TABLE\n",
    "bench/one.py": "import two\n",
    "bench/two.py": "def g():\n    from one import z\n",
}


def test_a_planted_circle_fails_the_check(tmp_path):
    for relative, text in PLANTED.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    modules = {**_modules(tmp_path / "pkg"), **_modules(tmp_path / "found"), **_scripts(tmp_path / "bench", "bench")}
    cycles = {" -> ".join(c) for c in _circles(import_graph(modules))}
    assert cycles == {"pkg -> pkg.first -> pkg", "pkg.second -> pkg.third -> pkg.second",
                      "pkg.fourth -> pkg.sub.deep -> pkg.fourth", "found -> found.entry -> found",
                      "bench.one -> bench.two -> bench.one"}


# Each package (and module loose at the top) by layer, lowest first: a module imports only from
# its own layer or lower ones. A new package gets a layer here before it can be imported from.
LAYERS = {
    "settings": 0, "registry": 0,
    "data": 1, "lm": 1,
    "retrievers": 2, "signatures": 2,
    "judging": 3,
    "programs": 4,
    "evaluation": 5,
    "train": 6, "teleprompt": 6, "serving": 6,
    "optimize": 7,
    "cli": 8,
    "__init__": 9,  # the public API, over everything
}
MAX_LOOSE_MODULES = 5


def _unit(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return parts[0]


def test_no_import_runs_up_the_layers():
    modules = _modules()
    unknown = sorted({_unit(path) for path in modules.values()} - set(LAYERS))
    assert unknown == [], f"give these a layer in LAYERS: {unknown}"
    upward = []
    for path in modules.values():
        here = _unit(path)
        for target in _imports(path, modules) | _root_imports(path):
            there = "__init__" if target == "treeqa" else _unit(modules[target])
            if LAYERS[there] > LAYERS[here]:
                upward.append(f"{path.relative_to(ROOT)} imports {target}")
    assert upward == [], "; ".join(sorted(upward))


def _root_imports(path: Path) -> set[str]:
    """`import treeqa` / `from treeqa import x` where x is not a submodule: the public API."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "treeqa" and node.level == 0:
            out |= {"treeqa" for a in node.names if not (ROOT / a.name).exists()
                    and not (ROOT / f"{a.name}.py").exists()}
        elif isinstance(node, ast.Import) and any(a.name == "treeqa" for a in node.names):
            out.add("treeqa")
    return out


def test_few_modules_loose_at_the_top():
    loose = sorted(p.name for p in ROOT.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_LOOSE_MODULES, f"{len(loose)} modules loose in treeqa/: {loose}"


def test_no_module_outside_programs_names_a_program():
    from treeqa.programs import PROGRAMS

    quoted = re.compile("[\"'](" + "|".join(PROGRAMS) + ")[\"']")
    offenders = []
    for path in ROOT.rglob("*.py"):
        if "programs" in path.relative_to(ROOT).parts:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        # the literal pieces of an f-string (f"{n}hop") are not names a program could be chosen by
        pieces = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings | pieces and quoted.fullmatch(repr(node.value))):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert offenders == []


def _tests_imports_outside_fakes(source: str, package: str) -> list[tuple[int, str]]:
    """(line, module) for each module under tests/ that `source`, a module of `package` ("tests",
    or "tests.fakes" for the helpers' own modules), imports other than `tests.fakes` and its
    submodules, at the top or inside a function; relative imports are resolved from `package`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            named = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # from . import x, from .x import y, from ..x import y
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            named = [f"{module}.{a.name}" for a in node.names] if module == "tests" else [module]
        else:
            continue
        found += [(node.lineno, name) for name in named if (name == "tests" or name.startswith("tests."))
                  and name != "tests.fakes" and not name.startswith("tests.fakes.")]
    return found


def test_test_modules_import_shared_helpers_from_fakes_only():
    """Shared fixtures live in conftest.py, shared doubles and data in the tests/fakes/ package: no
    module under tests/ or tests/fakes/ (conftest.py aside) imports another test module, conftest
    or any tests module but `tests.fakes` and its submodules, at the top or inside a function."""
    offenders = []
    for path in sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts):
        if path.name == "conftest.py":
            continue
        package = ".".join(path.relative_to(TESTS.parent).parent.parts)
        offenders += [f"{path.relative_to(TESTS)}:{line} {name}"
                      for line, name in _tests_imports_outside_fakes(path.read_text(), package)]
    assert offenders == [], "import shared helpers from tests.fakes (fixtures: conftest.py): " + ", ".join(offenders)
    # the check still catches a test module (or conftest) imported, however it is spelt
    sample = ("import tests.test_lm\nfrom tests.test_lm import x\nfrom tests import fakes, test_lm\n"
              "from .conftest import y\nfrom tests.fakes.lm import z\nfrom tests.fakes import w\n")
    assert [name for _, name in _tests_imports_outside_fakes(sample, "tests")] == [
        "tests.test_lm", "tests.test_lm", "tests.test_lm", "tests.conftest"]
    assert [name for _, name in _tests_imports_outside_fakes("from ..test_lm import x\nfrom . import lm\n",
                                                             "tests.fakes")] == ["tests.test_lm"]


MAX_FUNCTION_LINES = 60


def test_no_function_is_over_sixty_lines():
    """A function longer than a screen is split into named steps (its nested functions count
    in it): the rule the package is held to, checked here since ruff has no line-count rule."""
    long = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if node.end_lineno - first + 1 > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
                                f"({node.end_lineno - first + 1} lines)")
    assert long == [], "; ".join(long)


# folders of tests that mirror no package: the real model and data, and the benchmark scripts
OWN_TEST_FOLDERS = {"integration", "benchmarks", "fakes", "fixtures"}
# what tests the package as a whole stays at the top of tests/
TOP_LEVEL_TESTS = {"test_layout.py", "test_docs_blocks.py", "test_extending.py", "test_public_api.py",
                   "test_registry.py", "test_settings.py", "test_repository.py", "test_docs_commands.py"}


def test_tests_mirror_the_package():
    """tests/<package>/ tests treeqa/<package>/; the integration tests have their own folder."""
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders - packages - OWN_TEST_FOLDERS == set()
    assert {p.name for p in TESTS.glob("test_*.py")} <= TOP_LEVEL_TESTS
    integration = {p.name for p in (TESTS / "integration").glob("test_*.py")}
    for path in TESTS.rglob("test_*.py"):
        marked = "pytest.mark.integration" in path.read_text()
        assert marked == (path.name in integration) or path.parent.name != "integration", path


# --- imports at the top ---------------------------------------------------------------------

# every package of treeqa/ and every module loose at its top
IMPORTS_CHECKED = ("retrievers", "programs", "signatures", "judging", "teleprompt", "train", "optimize",
                   "evaluation", "lm", "data", "serving", "cli", "settings.py", "registry.py", "__init__.py")


def _unexplained_imports(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in top:
            continue
        row = node.lineno - 1
        while row >= 0 and "#" not in lines[row]:
            above = lines[row - 1].strip() if row else ""
            if not (above.startswith(("import ", "from ")) or above.startswith("#")):
                break
            row -= 1
        if row < 0 or "#" not in lines[row]:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def test_imports_inside_functions_say_why():
    """What a module depends on is read at its top: an import inside a function says why it is
    there (a heavy or optional dependency loaded on first use, an import circle), in a comment on
    its line or just above the imports it opens."""
    paths = [p for unit in IMPORTS_CHECKED
             for p in ([ROOT / unit] if unit.endswith(".py") else sorted((ROOT / unit).rglob("*.py")))]
    assert all(p.is_file() for p in paths) and len(paths) > 40
    # every package and loose module is checked, so a new one is too
    units = {p.name for p in ROOT.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    assert units == set(IMPORTS_CHECKED)
    unexplained = [line for path in paths for line in _unexplained_imports(path)]
    assert unexplained == [], "\n".join(unexplained)
