"""The tests say each helper once: one written in two test modules belongs in ``tests/helpers.py`` (a fixture,
in a ``conftest.py``)."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _helpers(path: Path):
    """``(name, shape)`` of each module-level function of ``path`` that is not a test; the shape is its decorators,
    arguments and body without the docstring, so that two copies match whatever their names and docstrings."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("test_"):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            yield node.name, ast.dump(ast.Module(body=[*node.decorator_list, node.args, *body], type_ignores=[]))


def test_no_helper_is_written_twice_in_the_tests():
    first = {}
    for path in sorted([REPO / "conftest.py", *(REPO / "tests").rglob("*.py")]):
        for name, shape in _helpers(path):
            place = f"{path.relative_to(REPO)}::{name}"
            assert shape not in first, f"{place} is {first[shape]} again: keep one, in tests/helpers.py"
            first[shape] = place
