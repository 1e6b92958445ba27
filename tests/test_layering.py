"""The packages' imports point one way: the core under everything, HTTP and compute side by side
on it, the command on top (docs/architecture.md). Read from the source with ``ast``, so an
import inside a function counts as much as one at the top."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("uocr_core", "ocr_api", "ocr_worker", "uocr_cli", "uocr_client")
# What each package may import of the others (the layers, lowest first).
ALLOWED = {
    "uocr_core": set(),
    "uocr_client": {"uocr_core"},
    "ocr_api": {"uocr_core"},
    "ocr_worker": {"uocr_core"},
    "uocr_cli": {"uocr_core", "ocr_worker", "uocr_client"},
}
# The client's share of the core: the public models of the HTTP API, nothing of the server.
CLIENT_MAY_IMPORT = ("uocr_core.schemas", "uocr_core.contracts")
FRAMEWORKS = ("fastapi", "starlette")


def _modules(package: str) -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        yield dotted.removesuffix(".__init__"), path


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _top(name: str) -> str:
    return name.split(".")[0]


def _imports_where(package: str, wrong: Callable[[str], bool]) -> list[str]:
    """Every import of ``package``'s modules that ``wrong`` refuses, as "module imports name"."""
    return sorted(
        f"{module} imports {name}"
        for module, path in _modules(package)
        for name in _imports(path)
        if wrong(name)
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    def wrong(name: str) -> bool:
        other = _top(name)
        return other in PACKAGES and other != package and other not in ALLOWED[package]

    assert not (found := _imports_where(package, wrong)), found


def test_the_core_imports_no_web_framework() -> None:
    found = _imports_where("uocr_core", lambda name: _top(name) in FRAMEWORKS)
    assert not found, found


def test_the_client_takes_only_the_public_models_from_the_core() -> None:
    def wrong(name: str) -> bool:
        return _top(name) == "uocr_core" and not name.startswith(CLIENT_MAY_IMPORT)

    assert not (found := _imports_where("uocr_client", wrong)), found


def _folder(module: str, folders: set[str]) -> str | None:
    """The deepest package folder that holds ``module`` (a module's own folder)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in folders:
            return ".".join(parts[:end])
    return None


def test_no_import_circle_between_folders() -> None:
    """Folders (packages and their subpackages) as nodes, an arrow for each import from one
    folder's module into another's: the graph has no cycle, so every arrow runs one way."""
    modules = {m: p for package in PACKAGES for m, p in _modules(package)}
    folders = {m for m, p in modules.items() if p.name == "__init__.py"}
    arrows: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        here = _folder(module if path.name == "__init__.py" else module.rpartition(".")[0], folders)
        for name in _imports(path):
            there = _folder(name if name in folders else name.rpartition(".")[0], folders)
            if here and there and here != there and not here.startswith(there + "."):
                arrows[here].add(there)
    cycle = _a_cycle(arrows)
    assert cycle is None, " -> ".join(cycle or [])


def _a_cycle(arrows: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(arrows.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(arrows):
        if node not in state and (found := visit(node)):
            return found
    return None
