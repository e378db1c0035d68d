"""``kuro gateway serve`` / ``publish`` and ``--gateway URL`` (``$KURO_GATEWAY``): runs, kuro.fs and
``kuro car`` on blocks that live only on a gateway, and a run whose guest cannot be fetched ending
in its receipt, never a traceback. The gateway is a ``kuro gateway serve`` subprocess on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_helpers import Kuro, add_guest, kuro_runner, one_error_line

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.car import read_car
from kuro_fs.cid import raw_cid
from kuro_fs.errors import GatewayTimeout
from kuro_fs.fs import Fs
from kuro_fs.gateway.client import GatewayBlockStore
from kuro_fs.home import refs_dir
from kuro_wasm.cli.context import Context
from kuro_wasm.cli.kuro import build_parser
from kuro_wasm.cli.refs import Refs

TOKEN = "cli-test-token"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Kuro]]:
    """A gateway over its own home (holding the hello guest); yields (url, runner for that home)."""
    home = tmp_path / "gateway-home"
    home.mkdir()
    owner = kuro_runner(home, tmp_path)
    env = {**os.environ, "KURO_HOME": str(home), "KURO_GATEWAY_TOKEN": TOKEN}
    env.pop("KURO_GATEWAY", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", "gateway", "serve", "--port", "0"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = None
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            m = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
            url = m.group(1) if m else None
        assert url is not None, "kuro gateway serve did not start"
        drain = threading.Thread(target=proc.stderr.read, daemon=True)  # keep its log pipe from filling
        drain.start()
        yield url, owner
    finally:
        proc.terminate()
        proc.wait(20)
        if proc.stderr is not None:
            proc.stderr.close()


def test_serve_refuses_to_serve_through_another_gateway(kuro: Kuro) -> None:
    result = kuro("gateway", "serve", "--gateway", "http://127.0.0.1:9")
    assert result.returncode == 2 and "home's own blocks" in one_error_line(result)


def test_serve_refuses_a_bad_port_and_an_empty_token_file(kuro: Kuro, tmp_path: Path) -> None:
    assert "not a TCP port" in one_error_line(kuro("gateway", "serve", "--port", "70000"))
    empty = tmp_path / "token"
    empty.write_text("\n")
    assert "is empty" in one_error_line(kuro("gateway", "serve", "--token-file", str(empty)))


def test_serve_on_a_port_in_use_is_one_line_naming_the_address(kuro: Kuro) -> None:
    # uvicorn's own bind failure printed three lines and exited 3 (a status kuro does not have).
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = kuro("gateway", "serve", "--port", str(port))
    line = one_error_line(result)
    assert result.returncode == 1 and f"127.0.0.1:{port}" in line and "in use" in line, line


@pytest.mark.parametrize("token", [b"\xff\xfe", "t\u00f6k\u00e9n".encode(), b"bell\x07"])
def test_a_token_an_http_header_cannot_carry_is_a_usage_error_for_serve_and_publish(
    kuro: Kuro, tmp_path: Path, token: bytes
) -> None:
    # A non-UTF-8 token file was an internal error; a non-ASCII token gave a read-only-in-effect gateway
    # (no client can send it) and a publish that died of UnicodeEncodeError.
    path = tmp_path / "token"
    path.write_bytes(token)
    # (an address no one can bind: a gateway that took the token would stop there, not serve on)
    line = one_error_line(kuro("gateway", "serve", "--host", "256.0.0.1", "--token-file", str(path)))
    assert "token" in line and "[usage]" in line and "internal" not in line
    if token == b"\xff\xfe":
        return
    env = {"KURO_GATEWAY_TOKEN": token.decode(), "KURO_GATEWAY": "http://127.0.0.1:9"}
    line = one_error_line(kuro("gateway", "publish", raw_cid(b"x"), env=env))
    assert "KURO_GATEWAY_TOKEN" in line and "internal" not in line


@pytest.mark.parametrize("where", ["before", "after", "joined"])
@pytest.mark.parametrize("command", [["fs", "ls"], ["run", "bafkqaaa", "run"], ["ledger", "list"]])
def test_a_malformed_gateway_url_is_one_typed_line_wherever_it_is_given(
    kuro: Kuro, where: str, command: list[str]
) -> None:
    bad = "http://[::1"
    args = {
        "before": ["--gateway", bad, *command],
        "after": [*command, "--gateway", bad],
        "joined": [f"--gateway={bad}", *command],
    }[where]
    line = one_error_line(kuro(*args))
    assert "malformed gateway URL" in line and "[invalid-gateway-url]" in line and "internal" not in line


def test_publish_needs_a_gateway(kuro: Kuro) -> None:
    assert "needs a gateway" in one_error_line(kuro("gateway", "publish", "bafkqaaa"))


def test_a_run_fetches_its_guest_from_the_gateway(served: tuple[str, Kuro], kuro: Kuro) -> None:
    url, owner = served
    cid = add_guest(owner, "hello.wat")
    result = kuro("run", "--gateway", url, cid, "run")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello, kuro\n"
    again = kuro("run", cid, "run")  # verified and kept in this home: no gateway needed any more
    assert again.returncode == 0 and again.stdout == "hello, kuro\n"


def test_a_guest_the_gateway_lacks_is_a_guest_not_found_receipt(served: tuple[str, Kuro], kuro: Kuro) -> None:
    url, _ = served
    missing = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    result = kuro("run", missing, "run", env={"KURO_GATEWAY": url})
    assert result.returncode == 127
    assert "guest-not-found" in result.stderr and "Traceback" not in result.stderr


def test_a_guest_behind_an_unreachable_gateway_is_a_load_error_receipt_naming_the_cause(kuro: Kuro) -> None:
    cid = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    result = kuro("run", "--gateway", "http://127.0.0.1:9", cid, "run", "--json")
    assert result.returncode == 126, result.stderr
    assert "Traceback" not in result.stderr
    receipt = json.loads(result.stdout.splitlines()[-1])
    assert receipt["kuro/outcome"] == "load-error"
    assert "gateway-unreachable" in json.dumps(receipt) or "gateway-unreachable" in result.stderr


def test_kuro_fs_and_car_work_on_blocks_held_only_by_the_gateway(
    served: tuple[str, Kuro], kuro: Kuro, tmp_path: Path
) -> None:
    url, owner = served
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "note.txt").write_bytes(b"from the gateway\n" * 5000)
    put = owner("fs", "put", str(tmp_path / "tree"))
    assert put.returncode == 0, put.stderr
    root = owner("fs", "log").stdout.splitlines()[-1].lstrip("* ").split()[1]
    out = tmp_path / "out.car"
    exported = kuro("car", "export", str(out), root, "--gateway", url)
    assert exported.returncode == 0, exported.stderr
    with out.open("rb") as f:
        roots, sections = read_car(f)
        assert roots == [root] and len(list(sections)) >= 2


def test_gateway_is_a_global_option_given_before_the_command(
    served: tuple[str, Kuro], kuro: Kuro, tmp_path: Path
) -> None:
    url, owner = served
    data = bytes(range(256)) * 4000  # four blocks
    (tmp_path / "big.bin").write_bytes(data)
    assert owner("fs", "put", str(tmp_path / "big.bin")).returncode == 0
    root = owner("fs", "log").stdout.splitlines()[-1].lstrip("* ").split()[1]
    exported = kuro("--gateway", url, "car", "export", str(tmp_path / "a.car"), root)
    assert exported.returncode == 0, exported.stderr
    joined = kuro(f"--gateway={url}", "--home", str(tmp_path / "other"), "car", "export", str(tmp_path / "b.car"), root)
    assert joined.returncode == 0, joined.stderr
    assert (tmp_path / "a.car").read_bytes() == (tmp_path / "b.car").read_bytes()


def test_publish_pushes_a_dag_from_this_home_to_the_gateway(
    served: tuple[str, Kuro], kuro: Kuro, tmp_path: Path
) -> None:
    url, owner = served
    cid = add_guest(kuro, "hello.wat")
    denied = kuro("gateway", "publish", cid, "--gateway", url, env={"KURO_GATEWAY_TOKEN": "wrong"})
    assert denied.returncode == 1 and json.loads(denied.stdout)["reasons"] == {cid: "unauthorized"}
    pushed = kuro("gateway", "publish", cid, "--gateway", url, env={"KURO_GATEWAY_TOKEN": TOKEN})
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout) == {"published": 1, "rejected": [], "reasons": {}}
    ran = owner("run", cid, "run")  # the gateway's home now holds it
    assert ran.returncode == 0 and ran.stdout == "hello, kuro\n"


# ---- kuro batch --gateway URL: the gateway is probed before anything runs


def _batch_file(path: Path, guest: str, n: int) -> Path:
    lines = [{"guest": guest, "export": "run", "op_id": f"gw-{i}"} for i in range(n)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_batch_reads_its_guest_from_the_gateway(served: tuple[str, Kuro], kuro: Kuro, tmp_path: Path) -> None:
    url, owner = served
    cid = add_guest(owner, "hello.wat")  # held by the gateway only
    result = kuro("batch", str(_batch_file(tmp_path / "b.jsonl", cid, 2)), "--local", "1", "--json", "--gateway", url)
    assert result.returncode == 0, result.stderr
    receipts = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["kuro/stdout-cid"] for r in receipts] == [raw_cid(b"hello, kuro\n")] * 2, receipts


def _nothing_recorded(kuro: Kuro, result: subprocess.CompletedProcess[str]) -> str:
    line = one_error_line(result)
    assert result.returncode == 2 and result.stdout == "" and "nothing was run" in line
    listed = kuro("ledger", "list", "--json")
    assert listed.returncode == 0 and listed.stdout == "", listed.stdout  # no op id claimed, none recorded
    return line


def test_a_batch_on_an_unreachable_gateway_is_one_typed_line_and_runs_nothing(kuro: Kuro, tmp_path: Path) -> None:
    cid = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    result = kuro(
        "batch", str(_batch_file(tmp_path / "b.jsonl", cid, 3)), "--local", "1", "--gateway", "http://127.0.0.1:9"
    )
    line = _nothing_recorded(kuro, result)
    assert "http://127.0.0.1:9" in line and line.endswith("[gateway-unreachable]"), line


def test_a_batch_on_a_server_that_is_no_trustless_gateway_runs_nothing(kuro: Kuro, tmp_path: Path) -> None:
    import http.server

    site = tmp_path / "site"
    site.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(site), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}"
            cid = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
            result = kuro("batch", str(_batch_file(tmp_path / "b.jsonl", cid, 3)), "--gateway", url)
        finally:
            server.shutdown()
    line = _nothing_recorded(kuro, result)
    assert "does not answer the trustless gateway protocol" in line and line.endswith("[gateway-refused]"), line


# ---- a prefetch is an optimisation: its failure leaves the reads to fetch block by block


def _slow_car_gateway(source: MemoryBlockStore, asked: list[str], raw_ok: bool = True) -> httpx.MockTransport:
    """A gateway whose CAR answers never come in time (ReadTimeout); raw blocks come from ``source``."""

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.params.get("format", request.method))
        if request.url.params.get("format") == "car":
            raise httpx.ReadTimeout("the CAR did not come", request=request)
        if not raw_ok:
            raise httpx.ReadTimeout("nothing comes", request=request)
        block = source.get(request.url.path.rsplit("/", 1)[1])
        return httpx.Response(404) if block is None else httpx.Response(200, content=block)

    return httpx.MockTransport(answer)


def _command(tmp_path: Path, transport: httpx.MockTransport, root: str, argv: list[str]) -> tuple[int, Context]:
    # The CLI handler for argv, on a home whose tree "t" is held only by the gateway behind ``transport``.
    home = tmp_path / "home"
    Refs(refs_dir(home)).set("t", root, "test", expected=None)
    store = GatewayBlockStore("http://gateway.test", MemoryBlockStore(), transport=transport)
    out = io.TextIOWrapper(io.BytesIO())  # binary beneath, as a terminal's stdout: `fs cat` writes to .buffer
    ctx = Context(home=home, out=out, err=io.StringIO(), gateway="http://gateway.test", _store=store)
    args, _ = build_parser("fs").parse_known_args(["fs", *argv])
    args.extras, args.tokens = [], argv
    try:
        return args.handler(args, ctx), ctx
    finally:
        ctx.close()


@pytest.mark.parametrize("command", ["cat", "get"])
def test_a_prefetch_that_times_out_falls_back_to_fetching_the_blocks_on_demand(command: str, tmp_path: Path) -> None:
    # GatewayTimeout from the prefetch ended `kuro fs get`/`cat` although every block could be fetched.
    source = MemoryBlockStore()
    data = bytes(range(256)) * 3000  # three leaves and a root
    root = Fs.empty(source).write("note.bin", data).fs.root
    asked: list[str] = []
    argv = (
        ["cat", "-n", "t", "note.bin"]
        if command == "cat"
        else ["get", "-n", "t", "note.bin", str(tmp_path / "got.bin")]
    )
    code, ctx = _command(tmp_path, _slow_car_gateway(source, asked), str(root), argv)
    assert code == 0
    got = (tmp_path / "got.bin").read_bytes() if command == "get" else ctx.out.buffer.getvalue()  # type: ignore[attr-defined]
    assert got == data
    assert "car" in asked and asked.count("raw") >= 4  # the CAR was tried, then the blocks came one by one


def test_a_prefetch_that_times_out_and_blocks_that_cannot_come_either_is_a_typed_timeout(tmp_path: Path) -> None:
    source = MemoryBlockStore()
    root = Fs.empty(source).write("note.bin", b"x" * 300_000).fs.root
    asked: list[str] = []
    transport = _slow_car_gateway(source, asked, raw_ok=False)
    with pytest.raises(GatewayTimeout):
        _command(tmp_path, transport, str(root), ["cat", "-n", "t", "note.bin"])
