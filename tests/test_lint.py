"""gpipe/ as ruff and mypy read it (both configured in pyproject.toml), and the return types of its public API.

ruff: pyflakes, import order and bugbear. mypy: every module, None checked in
full but in the modules pyproject.toml lists as known debt. Return types:
every function and method a public module of gpipe exports (``__all__``, or
its public names where it has none) says what it returns, where ruff's own
rule would see only those written in public modules (most of gpipe's API is
written in private ones and exported).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import gpipe

REPO = Path(__file__).resolve().parent.parent


def _check(*command: str) -> str:
    """What ``python -m command`` said, where it failed (an empty string where it passed)."""
    done = subprocess.run([sys.executable, "-m", *command], cwd=REPO, capture_output=True, text=True, timeout=600)
    return "" if done.returncode == 0 else done.stdout + done.stderr


def test_ruff_finds_nothing_in_gpipe():
    said = _check("ruff", "check", "gpipe")
    assert not said, said


def test_mypy_finds_nothing_in_gpipe():
    said = _check("mypy")  # its files and settings: pyproject.toml's
    assert not said, said


def _public_modules():
    yield gpipe
    for found in pkgutil.walk_packages(gpipe.__path__, "gpipe."):
        if not any(part.startswith("_") for part in found.name.split(".")):
            yield importlib.import_module(found.name)


def _exported(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name, value in vars(module).items()
                 if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__]
    return names


def _unannotated(module: types.ModuleType) -> list[str]:
    """The functions and public methods ``module`` exports (gpipe's own) without a return annotation."""
    missing = []
    for name in _exported(module):
        value = getattr(module, name)
        if inspect.isclass(value) and value.__module__.startswith("gpipe"):
            functions = [v.fget if isinstance(v, property) else getattr(v, "__func__", v)
                         for k, v in vars(value).items() if not k.startswith("_")]
        elif callable(value) and not inspect.isclass(value):
            functions = [inspect.unwrap(value)]
        else:
            continue
        missing += [f"{function.__module__}.{function.__qualname__}" for function in functions
                    if inspect.isfunction(function) and function.__module__.startswith("gpipe")
                    and "return" not in function.__annotations__]
    return missing


def test_every_function_and_method_gpipe_exports_says_what_it_returns():
    missing = sorted({name for module in _public_modules() for name in _unannotated(module)})
    assert not missing, "no return annotation:\n" + "\n".join(missing)


def test_the_return_check_tells_an_exported_function_or_method_without_one():
    module = types.ModuleType("gpipe.example")
    exec("class Result:\n"
         "    def compute(self): ...\n"
         "    @property\n"
         "    def size(self) -> int: ...\n"
         "    def _private(self): ...\n"
         "def walk(g): ...\n"
         "def annotated(g) -> None: ...\n"
         "def unexported(g): ...\n"
         "__all__ = ['Result', 'walk', 'annotated']\n", vars(module))
    assert _unannotated(module) == ["gpipe.example.Result.compute", "gpipe.example.walk"]
