"""The examples in docstrings are tests: every module of both packages runs its doctests.

(Run from here rather than with ``--doctest-modules`` so that test directories with
same-named ``conftest.py`` files do not collide.)
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import kuro_fs
import kuro_wasm

MODULES = sorted(
    info.name
    for package in (kuro_fs, kuro_wasm)
    for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + ".")
    if not info.name.endswith("__main__")
)


def test_both_packages_have_modules_to_check() -> None:
    assert "kuro_fs.cid" in MODULES and "kuro_wasm.model.sessions" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"
