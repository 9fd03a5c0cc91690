"""The package's import graph has no circles and no arrow back up.

A circle (a imports b, b imports a, directly or round a longer loop) means neither
module can be read, tested or moved without the other: the shared piece belongs in a
module below both. An arrow back up (the engine's driver importing the lab directory)
means a lower layer knows a higher one, so the lower one can no longer be used alone.

Every import counts, the ones inside functions too: an import moved into a function
hides a circle from Python's loader, not from a reader. The graph is read from the
source with `ast` (nothing is imported), relative imports resolved."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "stacklab"

# The layers below the run: each imports nothing from the modules that run an
# experiment, hold the lab directory, parse the command line or write reports.
LOWER = ("stacklab.measure.drive", "stacklab.analysis.stats", "stacklab.errors",
         "stacklab.netlab")
HIGHER = ("stacklab.run.runner", "stacklab.host.lab", "stacklab.cli", "stacklab.commands",
          "stacklab.report")

# The package root holds the entry point and what every role shares; every other module
# lives in the directory of its role, so a new module picks one.
ROOT_MODULES = {"stacklab", "stacklab.cli", "stacklab.env", "stacklab.errors",
                "stacklab.inventory", "stacklab.knobs",
                # what a layer of a run is (Layer, Place, the stack it runs under):
                # shared by the layers in netlab/ and run/, which run/ composes, so it
                # sits below both
                "stacklab.layer"}
# Each role's directory and the roles it never imports. The machine (host/) and the
# instruments (measure/) know no experiment, run, result or component; the store, the
# analysis and the experiment know no run; the run knows none of S1's methods; the
# methods, the studies and the reports know no command; nothing imports the command line.
ABOVE_ALL = ("stacklab.commands", "stacklab.cli")
SHOWN = ("stacklab.methods", "stacklab.studies", "stacklab.report") + ABOVE_ALL
NEVER = {
    "stacklab.host": ("stacklab.measure", "stacklab.stacks", "stacklab.workloads",
                      "stacklab.experiment", "stacklab.store", "stacklab.analysis",
                      "stacklab.run", "stacklab.env", "stacklab.inventory") + SHOWN,
    "stacklab.measure": ("stacklab.stacks", "stacklab.workloads", "stacklab.experiment",
                         "stacklab.store", "stacklab.analysis", "stacklab.run",
                         "stacklab.env", "stacklab.inventory") + SHOWN,
    "stacklab.store": ("stacklab.experiment", "stacklab.analysis", "stacklab.run",
                       "stacklab.env") + SHOWN,
    "stacklab.analysis": ("stacklab.run", "stacklab.env") + SHOWN,
    "stacklab.experiment": ("stacklab.store", "stacklab.run", "stacklab.env") + SHOWN,
    "stacklab.run": SHOWN,
    "stacklab.methods": ("stacklab.studies", "stacklab.report") + ABOVE_ALL,
    "stacklab.report": ("stacklab.run", "stacklab.methods", "stacklab.studies",
                        "stacklab.env") + ABOVE_ALL,
    "stacklab.studies": ABOVE_ALL,
    "stacklab.commands": ("stacklab.cli",),
}


def module_name(path: Path) -> str:
    """stacklab/netlab/net.py -> stacklab.netlab.net; a package's __init__.py is the
    package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that one module imports, anywhere in its body. `from a
    import b` names the module a.b where b is one, else a; a relative import is
    resolved against the module's package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {_owner(m, known) for m in found if _owner(m, known)} - {name}


def _owner(dotted: str, known: set[str]) -> str | None:
    """The longest known module a dotted name lies in (stacklab.analysis.stats.median -> the
    module stacklab.analysis.stats); None outside the package."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return None


def graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    found = modules()
    return {name: imported(name, path, set(found)) for name, path in found.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative so a deep package cannot hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def role(name: str) -> str:
    """The role directory a module lies in (its first two dotted parts: stacklab.netlab.net
    -> stacklab.netlab); a root module is a node of its own."""
    return ".".join(name.split(".")[:2])


def role_edges(edges: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(role, role it imports) -> the module-level edges that make that arrow."""
    found: dict[tuple[str, str], list[str]] = {}
    for name, targets in edges.items():
        for target in targets:
            if role(name) != role(target):
                found.setdefault((role(name), role(target)), []).append(f"{name} -> {target}")
    return found


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    """A module is one of the prefixes or lies in one of those packages."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_graph_is_read_from_every_import_form(tmp_path):
    """The reader finds module-level, function-level, relative and `from package import
    submodule` imports (a test of the test, on a small made-up module)."""
    known = {"stacklab", "stacklab.a", "stacklab.b", "stacklab.pkg", "stacklab.pkg.c",
             "stacklab.pkg.probe"}
    path = tmp_path / "probe.py"
    path.write_text("from .. import a\n"
                    "def f():\n    from . import c\n    import stacklab.b\n"
                    "from .c import thing\nfrom . import nothing_here\nimport json\n")
    assert imported("stacklab.pkg.probe", path, known) == {
        "stacklab.a", "stacklab.pkg.c", "stacklab.b", "stacklab.pkg"}
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    assert role("stacklab.netlab.net") == "stacklab.netlab" and role("stacklab.cli") == \
        "stacklab.cli"
    assert role_edges({"stacklab.a.x": {"stacklab.b.y", "stacklab.a.z"}}) == {
        ("stacklab.a", "stacklab.b"): ["stacklab.a.x -> stacklab.b.y"]}


def test_no_import_circles():
    """No two modules import each other, round any loop, in functions or not. A
    package's __init__.py importing its own submodules is a circle only when one of
    them imports the package back."""
    assert circles(graph()) == []


def test_the_role_directories_form_no_circle():
    """Grouped by role (host/, netlab/, run/ … and each root module alone), the package
    still imports one way: a circle between two directories means a piece of one belongs
    below both, even when no two modules import each other. The edges of each circle are
    printed, module by module."""
    arrows = role_edges(graph())
    roles: dict[str, set[str]] = {role(name): set() for name in modules()}
    for a, b in arrows:
        roles[a].add(b)
    found = circles(roles)
    shown = [f"a circle of {', '.join(c)}: " + "; ".join(
        edge for a, b in sorted(arrows) if a in c and b in c for edge in sorted(arrows[a, b]))
        for c in found]
    assert found == [], "\n".join(shown)


def test_no_lower_layer_imports_a_higher_one():
    """The engine's driver, the statistics, the error types and netlab are used by the
    run, the commands and the reports, never the other way round."""
    back = sorted(f"{name} -> {target}" for name, targets in graph().items()
                  if within(name, LOWER) for target in targets if within(target, HIGHER))
    assert back == []


def test_the_root_holds_only_the_entry_point_and_what_every_role_shares():
    """Every other module lives in its role's directory (host/, measure/, experiment/,
    run/, analysis/, methods/ …): a module added at the root is found here."""
    found = {name for name in modules() if name.count(".") <= 1
             and not (PACKAGE / name.removeprefix("stacklab.")).is_dir()}
    assert found == ROOT_MODULES


def test_no_role_imports_one_above_it():
    """The roles' directories import one way, module by module, functions included:
    NEVER says, for each role, the roles it never imports."""
    edges = graph()
    back = sorted(f"{name} -> {target}" for role, above in NEVER.items()
                  for name, targets in edges.items() if within(name, (role,))
                  for target in targets if within(target, above))
    assert back == []


def test_the_rule_of_roles_names_only_what_is_there():
    """A role or module renamed or removed leaves no stale name in NEVER, LOWER or
    HIGHER, which would make its rule pass vacuously."""
    names = set(modules())
    named = (set(NEVER) | {p for above in NEVER.values() for p in above} | set(LOWER)
             | set(HIGHER))
    assert sorted(p for p in named if p not in names) == []
