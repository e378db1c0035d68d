"""The compiled-module cache: memory and disk layers, HMAC-checked artifacts, bad entries rebuilt."""

from __future__ import annotations

import hashlib
import hmac
import stat
from pathlib import Path

import pytest
import wasmtime
from hostkit import make_fs, make_session, wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.home import module_cache_dir
from kuro_wasm.host.api import run
from kuro_wasm.host.cache import ModuleCache, cache_for
from kuro_wasm.host.engine import EngineConfig, engine_for, engine_key
from kuro_wasm.host.loader import add_guest, forget_prepared
from kuro_wasm.model.sessions import guest

CFG = EngineConfig()


@pytest.fixture
def cache(tmp_path: Path) -> ModuleCache:
    ModuleCache.forget_memory()
    return ModuleCache(tmp_path / "modules")


def _compile_once(cache: ModuleCache, cid: str, name: str = "hello") -> list[int]:
    calls: list[int] = []

    def wasm() -> bytes:
        calls.append(1)
        return bytes(wasmtime.wat2wasm(wat(name)))

    module = cache.get_or_compile(engine_for(CFG), engine_key(CFG), cid, wasm)
    assert isinstance(module, wasmtime.Module)
    return calls


def test_a_compiled_module_is_written_to_disk_and_read_back(cache: ModuleCache) -> None:
    assert _compile_once(cache, "bafkreiaaa") == [1]
    path = cache.path_for("bafkreiaaa", engine_key(CFG))
    assert path is not None and path.with_suffix(".tag").read_bytes().startswith(b"KUROMOD1")
    ModuleCache.forget_memory()
    assert _compile_once(cache, "bafkreiaaa") == []
    assert cache.stats.as_dict() == {"memory_hits": 0, "disk_hits": 1, "compiles": 1, "discarded": 0}


def test_a_memory_hit_touches_nothing(cache: ModuleCache) -> None:
    _compile_once(cache, "bafkreibbb")
    assert _compile_once(cache, "bafkreibbb") == []
    assert cache.stats.memory_hits == 1


@pytest.mark.parametrize(
    "damage", ["flip-artifact", "truncate", "flip-tag", "empty", "magic", "no-tag", "tag-truncated", "tag-trailing"]
)
def test_a_damaged_entry_is_discarded_and_rebuilt(cache: ModuleCache, damage: str) -> None:
    _compile_once(cache, "bafkreiccc")
    path = cache.path_for("bafkreiccc", engine_key(CFG))
    assert path is not None
    tag_path = path.with_suffix(".tag")
    blob, tag = bytearray(path.read_bytes()), bytearray(tag_path.read_bytes())
    if damage == "flip-artifact":
        blob[-100] ^= 0xFF
    elif damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage == "flip-tag":
        tag[-1] ^= 0x01
    elif damage == "empty":
        blob = bytearray()
    elif damage == "magic":
        tag[0:8] = b"NOTKURO!"
    elif damage == "tag-truncated":
        tag = tag[:-1]
    elif damage == "tag-trailing":  # the right tag, then one byte more: no tag of this format
        tag += b"\0"
    path.write_bytes(bytes(blob))
    if damage == "no-tag":
        tag_path.unlink()
    else:
        tag_path.write_bytes(bytes(tag))
    ModuleCache.forget_memory()
    assert _compile_once(cache, "bafkreiccc") == [1]
    assert cache.stats.discarded == 1
    ModuleCache.forget_memory()
    assert _compile_once(cache, "bafkreiccc") == []  # the rebuilt entry is good again


def test_an_entry_filed_under_another_guest_is_not_trusted(cache: ModuleCache) -> None:
    _compile_once(cache, "bafkreispin", "spin")
    _compile_once(cache, "bafkreihello", "hello")
    spin_path = cache.path_for("bafkreispin", engine_key(CFG))
    hello_path = cache.path_for("bafkreihello", engine_key(CFG))
    assert spin_path is not None and hello_path is not None
    for suffix in (".cwasm", ".tag"):
        hello_path.with_suffix(suffix).write_bytes(spin_path.with_suffix(suffix).read_bytes())
    ModuleCache.forget_memory()
    assert _compile_once(cache, "bafkreihello") == [1]
    assert cache.stats.discarded == 1


def test_an_entry_tagged_in_the_old_hmac_format_is_discarded_and_rebuilt(cache: ModuleCache) -> None:
    _compile_once(cache, "bafkreiddd")
    path = cache.path_for("bafkreiddd", engine_key(CFG))
    assert path is not None
    junk = b"not a wasmtime artifact at all"
    key = (cache.directory / ".hmac-key").read_bytes()  # type: ignore[operator]
    tag = hmac.new(key, f"bafkreiddd\n{engine_key(CFG)}".encode() + b"\0" + junk, hashlib.sha256).digest()
    path.write_bytes(junk)
    path.with_suffix(".tag").write_bytes(b"KUROMOD1" + tag)
    ModuleCache.forget_memory()
    assert _compile_once(cache, "bafkreiddd") == [1]
    assert cache.stats.discarded == 1


def test_the_hmac_key_is_private(cache: ModuleCache) -> None:
    _compile_once(cache, "bafkreieee")
    assert cache.directory is not None
    mode = stat.S_IMODE((cache.directory / ".hmac-key").stat().st_mode)
    assert mode == 0o600


def test_engine_configs_have_separate_entries(cache: ModuleCache) -> None:
    fuel = EngineConfig(fuel=True)
    assert engine_key(fuel) != engine_key(CFG)
    assert cache.path_for("bafkreifff", engine_key(fuel)) != cache.path_for("bafkreifff", engine_key(CFG))


def test_a_memory_only_cache_writes_nothing(tmp_path: Path) -> None:
    ModuleCache.forget_memory()
    memory_only = cache_for(False)
    assert memory_only.directory is None
    assert _compile_once(memory_only, "bafkreiggg") == [1]


def test_a_run_fills_the_cache_under_the_home(store: MemoryBlockStore, home: Path) -> None:
    ModuleCache.forget_memory()
    forget_prepared()
    cid = add_guest(store, wat("utf8"))
    sess = make_session(make_fs(store))
    assert run(sess, guest(cid, "run"), store=store, home=home)["kuro/outcome"] == "ok"
    assert any(p.suffix == ".cwasm" for p in module_cache_dir(home).iterdir())


def test_runs_compile_once_reuse_the_disk_entry_and_rebuild_a_corrupt_one(store: MemoryBlockStore, home: Path) -> None:
    ModuleCache.forget_memory()
    forget_prepared()
    cid = add_guest(store, wat("hello"))
    sess = make_session(make_fs(store))
    cache = cache_for(home)
    counts = cache.stats

    def hello() -> None:
        receipt = run(sess, guest(cid, "run"), store=store, home=home)
        assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("ok", b"hello, kuro\n")

    def cold() -> None:  # a new process: nothing compiled in memory, the disk layer is all there is
        ModuleCache.forget_memory()
        forget_prepared()

    compiles, disk_hits, discarded = counts.compiles, counts.disk_hits, counts.discarded
    hello()
    assert counts.compiles == compiles + 1
    hello()  # warm: not compiled again
    assert counts.compiles == compiles + 1
    cold()
    hello()
    assert (counts.compiles, counts.disk_hits) == (compiles + 1, disk_hits + 1)
    path = cache.path_for(cid, engine_key(CFG))
    assert path is not None
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    path.write_bytes(bytes(blob))
    cold()
    hello()  # the damaged entry is not trusted: discarded, recompiled from the verified guest, written again
    assert (counts.compiles, counts.discarded) == (compiles + 2, discarded + 1)
    cold()
    hello()
    assert (counts.compiles, counts.disk_hits) == (compiles + 2, disk_hits + 2)
