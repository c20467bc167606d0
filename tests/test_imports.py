"""lib's imports point one way: no module imports another inside a function (an import hidden there to dodge a
circle), and the graph of lib's own imports has no circle, so lib stands in floors, each importing only below."""
import ast
from pathlib import Path

from lib import PROJECT_ROOT

LIB = PROJECT_ROOT / "lib"


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in LIB.rglob("*.py")}


def lib_imports(path: Path) -> list[tuple[str, bool]]:
    """(imported lib module, whether the import stands inside a function) for every import of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom) and child.module and child.module.split(".")[0] == "lib":
                for alias in child.names:  # "from lib.studies import common" imports the module lib.studies.common
                    full = f"{child.module}.{alias.name}"
                    found.append((full if full in MODULES else child.module, inside))
            elif isinstance(child, ast.Import):
                found.extend((a.name, inside) for a in child.names if a.name.split(".")[0] == "lib")
            visit(child, inside)
    visit(tree, False)
    return [(name, inside) for name, inside in found if name in MODULES]


GRAPH = {name: {target for target, _ in lib_imports(path)} - {name} for name, path in MODULES.items()}


def test_no_lib_import_hides_inside_a_function():
    hidden = sorted({(name, target) for name, path in MODULES.items()
                     for target, inside in lib_imports(path) if inside})
    assert hidden == [], "move these imports to the top of their module (a circle they dodged must be cut instead)"


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each module's floor: 0 for one importing nothing of lib, else one above the highest it imports; an
    ``AssertionError`` naming the circle where there is one."""
    found: dict[str, int] = {}

    def floor(name: str, path: tuple[str, ...] = ()) -> int:
        assert name not in path, "import circle: " + " -> ".join([*path[path.index(name):], name])
        if name not in found:
            found[name] = 1 + max((floor(t, (*path, name)) for t in graph[name]), default=-1)
        return found[name]
    for name in sorted(graph):
        floor(name)
    return found


def test_lib_imports_have_no_circle_so_every_import_points_down():
    level = floors(GRAPH)
    assert all(level[t] < level[n] for n, targets in GRAPH.items() for t in targets)
    assert level["lib.core.verdicts"] < level["lib.report"] and level["lib.core.data"] < level["lib.notebook"]


DEEPEST = 8  # levels of modules importing each other (floors 0..7): a reader follows any chain in one sitting


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The deepest chain of imports, from the module on the highest floor down to one importing nothing of lib."""
    level = floors(graph)
    chain = [max(sorted(graph), key=level.__getitem__)]
    while graph[chain[-1]]:
        chain.append(max(sorted(graph[chain[-1]]), key=level.__getitem__))
    return chain


def test_no_chain_of_imports_is_deeper_than_8_modules():
    chain = longest_chain(GRAPH)
    assert len(chain) <= DEEPEST, f"{len(chain)} levels: " + " -> ".join(chain)


def test_the_longest_chain_counts_each_floor_once():
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"c"}}
    assert longest_chain(graph) == ["a", "b", "c"]


# lib's packages by concern, each on its floor: the basics, then the three methods and the run pipeline side by
# side, then the studies; the modules users run (notebook set-up, report, dispatch, ...) stand on top, in lib/.
PACKAGES = {"lib.core": 0, "lib.cff": 1, "lib.ssl": 1, "lib.collapse": 1, "lib.run": 1, "lib.studies": 2}
TOP = 3


def package_of(module: str) -> str:
    return next((p for p in PACKAGES if module == p or module.startswith(p + ".")), "lib")


def test_every_module_lies_in_a_package_by_concern_or_is_run_by_users():
    loose = sorted(n for n in MODULES if package_of(n) == "lib" and n != "lib" and not (MODULES[n].read_text(
        encoding="utf-8").count("def main(") or n in ("lib.notebook", "lib.explore", "lib.render", "lib.execute")))
    assert loose == [], "a module below the top belongs in a package (lib.core, a method, lib.run, lib.studies)"


def test_packages_import_only_their_own_floor_or_below_and_methods_not_each_other():
    def floor(module):
        return PACKAGES.get(package_of(module), TOP)
    upward = sorted((n, t) for n, targets in GRAPH.items() for t in targets if floor(t) > floor(n))
    assert upward == []
    sideways = sorted((n, t) for n, targets in GRAPH.items() for t in targets
                      if floor(t) == floor(n) == 1 and package_of(t) != package_of(n))
    assert sideways == [], "a method or the run pipeline imports another: what they share belongs in lib.core"


def test_the_walk_sees_a_hidden_import_and_a_circle(tmp_path):
    """The checks above can fail: a planted import inside a function, a planted circle."""
    path = tmp_path / "planted.py"
    path.write_text("import os\nfrom lib.run import results\n\ndef f():\n    from lib.core import verdicts\n")
    assert lib_imports(path) == [("lib.run.results", False), ("lib.core.verdicts", True)]
    assert floors({"a": {"b"}, "b": set()}) == {"a": 1, "b": 0}
    try:
        floors({"a": {"b"}, "b": {"c"}, "c": {"a"}})
    except AssertionError as error:
        assert "import circle: a -> b -> c -> a" in str(error)
    else:
        raise AssertionError("a circle went unseen")


LONG = 400  # lines: a module past this says why in its docstring ("... past 400 lines because ...")


def test_a_module_past_400_lines_says_why_in_its_docstring():
    silent = sorted(name for name, path in MODULES.items() if len(path.read_text(encoding="utf-8").splitlines()) > LONG
                    and f"{LONG} lines because" not in " ".join((ast.get_docstring(ast.parse(path.read_text(
                        encoding="utf-8"))) or "").split()))
    assert silent == []
