"""``kuro fixtures run [DIR]``: a pass/fail table over a directory of cases, usable on anyone's cases."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import GUESTS, Kuro, one_error_line

from kuro_wasm.cli.kuro import main

CASES = sorted((GUESTS / "fixtures").glob("*.toml"))


def _kuro(home: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--home", str(home), "fixtures", "run", *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Another project's layout: its guests in proj/, its cases in proj/cases/."""
    proj = tmp_path / "proj"
    (proj / "cases").mkdir(parents=True)
    shutil.copy(GUESTS / "hello.wat", proj / "greeter.wat")
    (proj / "cases" / "greets.toml").write_text(
        'description = "greets"\nguest = "greeter"\nexport = "run"\n'
        '[expect]\nexit_code = 0\noutcome = "ok"\nstdout = "hello, kuro\\n"\n',
        encoding="utf-8",
    )
    return proj


def test_the_bundled_cases_all_pass_and_the_exit_status_is_0(home: Path) -> None:
    code, out, err = _kuro(home)
    assert code == 0, out + err
    rows = out.splitlines()
    assert len(rows) == len(CASES)
    assert all(row.split()[0] in ("pass", "n/a") for row in rows), out
    assert f"{len(CASES)} case(s) in " in err and " 0 fail, 0 invalid" in err


def test_another_projects_cases_find_their_guest_in_the_parent_directory(home: Path, project: Path) -> None:
    code, out, err = _kuro(home, str(project / "cases"))
    assert code == 0, out + err
    assert out.split()[:2] == ["pass", "greets"]


def test_a_failing_case_says_what_differed_and_exits_1(home: Path, project: Path) -> None:
    case = project / "cases" / "greets.toml"
    case.write_text(case.read_text(encoding="utf-8").replace("exit_code = 0", "exit_code = 3"), encoding="utf-8")
    code, out, err = _kuro(home, str(project / "cases"))
    assert code == 1
    assert out.startswith("FAIL") and "exit_code: expected 3, got 0" in out
    assert "1 fail" in err


def test_a_file_that_is_not_a_case_is_invalid_names_the_key_and_exits_1(home: Path, project: Path) -> None:
    (project / "cases" / "typo.toml").write_text(
        'descripton = "x"\nguest = "greeter"\nexport = "run"\n[expect]\nexit_code = 0\noutcome = "ok"\n',
        encoding="utf-8",
    )
    (project / "cases" / "broken.toml").write_text("this is = = not toml", encoding="utf-8")
    code, out, _ = _kuro(home, str(project / "cases"))
    assert code == 1
    rows = {row.split()[1]: row for row in out.splitlines()}
    assert rows["typo"].startswith("INVALID") and "descripton" in rows["typo"]
    assert rows["broken"].startswith("INVALID") and "cannot read" in rows["broken"]
    assert rows["greets"].startswith("pass")


def test_a_case_whose_guest_is_missing_is_invalid(home: Path, project: Path) -> None:
    (project / "greeter.wat").unlink()
    code, out, _ = _kuro(home, str(project / "cases"))
    assert code == 1 and out.startswith("INVALID") and "greeter" in out and "not found" in out


def test_a_case_unsupported_on_wasmtime_is_listed_with_its_reason_and_fails_nothing(home: Path, project: Path) -> None:
    case = project / "cases" / "greets.toml"
    case.write_text(case.read_text(encoding="utf-8") + '[unsupported]\nwasmtime = "needs a GPU"\n', encoding="utf-8")
    code, out, err = _kuro(home, str(project / "cases"))
    assert code == 0
    assert out.startswith("n/a") and "unsupported on wasmtime: needs a GPU" in out
    assert "1 unsupported here" in err


def test_json_is_one_object_per_case_with_its_receipt(home: Path, project: Path) -> None:
    code, out, _ = _kuro(home, str(project / "cases"), "--json")
    assert code == 0
    (line,) = [json.loads(text) for text in out.splitlines()]
    assert line["case"] == "greets" and line["status"] == "pass" and line["problems"] == []
    assert line["receipt"]["kuro/exit-code"] == 0
    assert line["receipt"]["kuro/stdout"] == {"/": {"bytes": "aGVsbG8sIGt1cm8K"}}


def test_an_empty_directory_is_a_failure_that_says_so(home: Path, tmp_path: Path) -> None:
    code, out, err = _kuro(home, str(tmp_path))
    assert code == 1 and out == ""
    assert "no *.toml case files" in err


def test_a_dir_that_is_not_a_directory_is_one_error_line(kuro: Kuro, tmp_path: Path) -> None:
    result = kuro("fixtures", "run", str(tmp_path / "nowhere"))
    assert result.returncode == 2
    assert "is not a directory of fixture cases" in one_error_line(result)


@pytest.mark.parametrize("named", ["ABSOLUTE", "../../outside/evil.wat", "../../outside/evil"])
def test_a_case_whose_guest_lies_outside_its_directory_and_parent_is_invalid_and_not_run(
    home: Path, project: Path, named: str
) -> None:
    outside = project.parent / "outside"
    outside.mkdir()
    shutil.copy(GUESTS / "hello.wat", outside / "evil.wat")
    guest = str(outside / "evil.wat") if named == "ABSOLUTE" else named
    case = project / "cases" / "greets.toml"
    case.write_text(case.read_text(encoding="utf-8").replace('"greeter"', json.dumps(guest)), encoding="utf-8")
    code, out, _ = _kuro(home, str(project / "cases"))
    assert code == 1 and out.startswith("INVALID"), out
    assert "greets" in out and "field guest" in out and "leads out of" in out and "Traceback" not in out


def test_a_case_whose_guest_is_a_symlink_out_of_its_directories_is_invalid(home: Path, project: Path) -> None:
    outside = project.parent / "outside"
    outside.mkdir()
    shutil.copy(GUESTS / "hello.wat", outside / "evil.wat")
    (project / "greeter.wat").unlink()
    (project / "greeter.wat").symlink_to(outside / "evil.wat")
    code, out, _ = _kuro(home, str(project / "cases"))
    assert code == 1 and out.startswith("INVALID") and "leads out of" in out and str(outside / "evil.wat") in out


def test_a_case_may_name_its_guest_by_a_path_that_stays_inside_its_parent(home: Path, project: Path) -> None:
    (project / "bin").mkdir()
    shutil.move(project / "greeter.wat", project / "bin" / "greeter.wat")
    case = project / "cases" / "greets.toml"
    case.write_text(case.read_text(encoding="utf-8").replace('"greeter"', '"../bin/greeter"'), encoding="utf-8")
    code, out, err = _kuro(home, str(project / "cases"))
    assert code == 0, out + err


@pytest.mark.parametrize("named", [".", "./", "", "cases/.."])
def test_a_case_whose_guest_names_a_directory_not_a_file_is_invalid_not_a_crash(
    home: Path, project: Path, named: str
) -> None:
    """``guest = "."`` names no file: one INVALID row, and the other cases of the directory still run."""
    shutil.copy(project / "cases" / "greets.toml", project / "cases" / "other.toml")
    case = project / "cases" / "greets.toml"
    case.write_text(case.read_text(encoding="utf-8").replace('"greeter"', json.dumps(named)), encoding="utf-8")
    code, out, _ = _kuro(home, str(project / "cases"))
    rows = {row.split()[1]: row for row in out.splitlines()}
    assert code == 1 and rows["greets"].startswith("INVALID") and "guest" in rows["greets"], out
    assert rows["other"].startswith("pass")


def test_a_case_file_that_is_a_dangling_symlink_is_invalid_not_skipped(home: Path, project: Path) -> None:
    """A case that cannot be read is a result saying so: a directory whose one case is gone does not pass."""
    (project / "cases" / "gone.toml").symlink_to(project / "nowhere.toml")
    code, out, _ = _kuro(home, str(project / "cases"))
    rows = {row.split()[1]: row for row in out.splitlines()}
    assert code == 1 and rows["gone"].startswith("INVALID") and "cannot read" in rows["gone"], out
    assert rows["greets"].startswith("pass")
