"""The documents are written from the data tables: every entry of each table has its row in the docs.

A name added to a table (an import, an error code, a kuro.fs reason, an outcome,
a denial reason) fails here until README.md / docs/*.md say what it means.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kuro_fs.fs import DENIAL_REASONS as FS_DENIAL_REASONS
from kuro_wasm.host.kinds.component import CAPABILITIES as COMPONENT_CAPABILITIES
from kuro_wasm.host.kinds.component import HOST_FUNCTIONS, error_name
from kuro_wasm.model.abi import IMPORTS, REASON_CODES, ErrorCode, ImportSpec
from kuro_wasm.model.receipt import KEYS, OUTCOMES
from kuro_wasm.model.sessions import ALIASES, CAPABILITIES, ORIGINAL_CAPABILITIES
from kuro_wasm.model.sessions import DENIAL_REASONS as MODEL_DENIAL_REASONS
from kuro_wasm.model.wasi import DENIED_ERRNO, FUNCTIONS, FuncSpec

ROOT = Path(__file__).resolve().parent.parent
DOCS = {
    name: (ROOT / name).read_text(encoding="utf-8")
    for name in ("README.md", "docs/abi.md", "docs/cli.md", "docs/components.md", "docs/wasi.md")
}


def _rows(doc: str) -> list[list[str]]:
    """The cells of every markdown table row in ``doc`` (separator rows left out)."""
    rows = []
    for line in DOCS[doc].splitlines():
        line = line.strip()
        if line.startswith("|") and line.endswith("|") and not set(line) <= set("|-: "):
            rows.append([cell.strip() for cell in line[1:-1].split("|")])
    return rows


def _row(doc: str, first_cell: str) -> list[str]:
    found = [row for row in _rows(doc) if row[0] == first_cell]
    assert len(found) == 1, f"{doc}: expected one table row starting {first_cell!r}, found {len(found)}"
    return found[0]


def test_the_row_reader_sees_the_tables() -> None:
    assert _row("docs/abi.md", "`write`")[2] == "—"
    assert _rows("README.md") and _rows("docs/cli.md")


@pytest.mark.parametrize("spec", IMPORTS, ids=[spec.name for spec in IMPORTS])
def test_every_abi_import_has_a_row_with_its_signature_and_capability(spec: ImportSpec) -> None:
    _, signature, needs, _meaning = _row("docs/abi.md", f"`{spec.name}`")
    params, results = signature.split("→")
    assert len(params.strip("() ").split(",")) == len(spec.params), signature
    assert ("i64" in params) == ("i64" in spec.params), signature
    assert results.strip() == " ".join(spec.results), signature
    assert needs == (f"`{spec.capability}`" if spec.capability else "—")


@pytest.mark.parametrize("spec", list(FUNCTIONS.values()), ids=list(FUNCTIONS))
def test_every_wasi_function_has_a_row_with_its_signature_needs_and_meaning(spec: FuncSpec) -> None:
    _, signature, needs, meaning = _row("docs/wasi.md", f"`{spec.name}`")
    assert signature == f"({', '.join(spec.params)}) → {' '.join(spec.results)}".strip()
    assert (needs, meaning) == (spec.needs, spec.meaning)


def test_the_wasi_page_names_the_errno_of_a_refusal() -> None:
    assert f"**`E{DENIED_ERRNO.name}`**" in DOCS["docs/wasi.md"]


@pytest.mark.parametrize("code", list(ErrorCode), ids=[code.name for code in ErrorCode])
def test_every_error_code_has_a_row_with_its_value_and_name(code: ErrorCode) -> None:
    row = _row("docs/abi.md", str(int(code)))
    assert row[1] == code.name


@pytest.mark.parametrize("reason", sorted(REASON_CODES))
def test_every_kuro_fs_reason_has_a_row_with_the_code_a_guest_sees(reason: str) -> None:
    row = _row("docs/abi.md", f"`{reason}`")
    assert row[1].split()[0] == str(int(REASON_CODES[reason]))


@pytest.mark.parametrize("reason", sorted(FS_DENIAL_REASONS))
def test_every_kuro_fs_denial_reason_is_mapped_to_an_error_code(reason: str) -> None:
    assert reason in REASON_CODES
    assert f"`{reason}`" in DOCS["docs/abi.md"]


@pytest.mark.parametrize("doc", ["README.md", "docs/abi.md"])
@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_every_outcome_has_a_row_with_its_exit_code(doc: str, outcome: str) -> None:
    found = [row for row in _rows(doc) if f"`{outcome}`" in row[0]]
    assert len(found) == 1, f"{doc}: {len(found)} outcome rows name {outcome!r}"
    code = OUTCOMES[outcome]
    if code is not None:
        assert found[0][1].split()[0] == str(code), found[0]


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
@pytest.mark.parametrize("reason", sorted(MODEL_DENIAL_REASONS))
def test_every_denial_reason_is_documented(doc: str, reason: str) -> None:
    assert f"`{reason}`" in DOCS[doc]


@pytest.mark.parametrize("doc", sorted(DOCS))
def test_no_document_calls_anything_safe(doc: str) -> None:
    assert "safe" not in DOCS[doc].lower()


def test_the_readme_names_the_receipt_facts_that_must_never_be_implied() -> None:
    text = DOCS["README.md"]
    for fact in ("`kuro/isolation`", "`kuro/truncated?`", "`kuro/dropped-bytes`", "`unknown`"):
        assert fact in text, fact


@pytest.mark.parametrize("key", sorted(KEYS))
def test_every_receipt_key_has_a_row_with_its_kind(key: str) -> None:
    row = _row("docs/abi.md", f"`kuro/{key}`")
    assert row[1] == KEYS[key].kind


_COMPONENT_IMPORTS = [(i, f) for i, funcs in HOST_FUNCTIONS.items() for f in funcs]


@pytest.mark.parametrize(("instance", "func"), _COMPONENT_IMPORTS, ids=[f"{i}#{f}" for i, f in _COMPONENT_IMPORTS])
def test_every_component_import_has_a_row_with_its_capability(instance: str, func: str) -> None:
    iface = instance.removeprefix("kuro:host/").removesuffix("@1.0.0")
    row = _row("docs/components.md", f"`{iface}.{func}`")
    capability = COMPONENT_CAPABILITIES.get(f"{instance}#{func}")
    assert row[2] == (f"`{capability}`" if capability else "—")


@pytest.mark.parametrize("code", list(ErrorCode), ids=[code.name for code in ErrorCode])
def test_every_error_code_is_named_in_the_component_docs(code: ErrorCode) -> None:
    assert f"`{error_name(code)}` ({int(code)}" in DOCS["docs/components.md"]


@pytest.mark.parametrize("capability", sorted(CAPABILITIES))
def test_every_capability_has_a_row_in_the_abi_doc(capability: str) -> None:
    assert len(_row("docs/abi.md", f"`{capability}`")[1]) > 5


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_every_original_grant_name_has_a_row_saying_what_it_stands_for(name: str) -> None:
    stands_for = _row("docs/abi.md", f"`{name}`")[1]
    grants = sorted(ALIASES[name].grants)
    assert stands_for == (", ".join(f"`{c}`" for c in grants) if grants else "nothing")


def test_every_original_grant_name_is_in_the_abi_doc() -> None:
    assert [n for n in ORIGINAL_CAPABILITIES if f"`{n}`" not in DOCS["docs/abi.md"]] == []
