"""The cache's on-disk tag format (2: keyed BLAKE3): older or foreign tags are discarded, never deserialized."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest
import wasmtime
from blake3 import blake3
from hostkit import wat

from kuro_wasm.host import cache as cache_module
from kuro_wasm.host.cache import ModuleCache
from kuro_wasm.host.engine import EngineConfig, engine_for, engine_key

CFG = EngineConfig()
# The format, written out independently of kuro_wasm.host.cache: MAGIC, format byte 2, keyed BLAKE3.
HEADER = b"KUROMOD1\x02"
CONTEXT = "kuro-wasm module cache 2026-11 artifact tag v2"


@pytest.fixture
def cache(tmp_path: Path) -> ModuleCache:
    ModuleCache.forget_memory()
    return ModuleCache(tmp_path / "modules")


def _get(cache: ModuleCache, cid: str, name: str = "hello") -> list[int]:
    calls: list[int] = []

    def wasm() -> bytes:
        calls.append(1)
        return bytes(wasmtime.wat2wasm(wat(name)))

    assert isinstance(cache.get_or_compile(engine_for(CFG), engine_key(CFG), cid, wasm), wasmtime.Module)
    return calls


def _entry(cache: ModuleCache, cid: str) -> tuple[Path, Path, bytes]:
    path = cache.path_for(cid, engine_key(CFG))
    assert path is not None and cache.directory is not None
    return path, path.with_suffix(".tag"), (cache.directory / ".hmac-key").read_bytes()


def _tag(secret: bytes, cid: str, artifact: bytes) -> bytes:
    key = blake3(secret, derive_key_context=CONTEXT).digest()
    return blake3(f"{cid}\n{engine_key(CFG)}".encode() + b"\0" + artifact, key=key).digest()


def test_an_entry_in_the_older_hmac_sha256_format_is_discarded_and_rebuilt(cache: ModuleCache) -> None:
    _get(cache, "bafkreiold")
    path, tag_path, secret = _entry(cache, "bafkreiold")
    artifact = path.read_bytes()  # a good artifact, tagged the way format 1 tagged it
    old = hmac.new(secret, f"bafkreiold\n{engine_key(CFG)}".encode() + b"\0" + artifact, hashlib.sha256).digest()
    tag_path.write_bytes(b"KUROMOD1" + old)
    ModuleCache.forget_memory()
    assert _get(cache, "bafkreiold") == [1]
    assert cache.stats.discarded == 1
    assert tag_path.read_bytes().startswith(HEADER)


def test_a_written_tag_is_the_keyed_blake3_of_the_cache_key_and_the_artifact(cache: ModuleCache) -> None:
    _get(cache, "bafkreinew")
    path, tag_path, secret = _entry(cache, "bafkreinew")
    assert tag_path.read_bytes() == HEADER + _tag(secret, "bafkreinew", path.read_bytes())


@pytest.mark.parametrize("header", [b"KUROMOD1\x01", b"KUROMOD1\x03", b"KUROMOD2\x02"])
def test_a_valid_mac_under_another_header_is_not_trusted(cache: ModuleCache, header: bytes) -> None:
    _get(cache, "bafkreihdr")
    path, tag_path, secret = _entry(cache, "bafkreihdr")
    tag_path.write_bytes(header + _tag(secret, "bafkreihdr", path.read_bytes()))
    ModuleCache.forget_memory()
    assert _get(cache, "bafkreihdr") == [1]
    assert cache.stats.discarded == 1


def test_a_correctly_tagged_artifact_wasmtime_refuses_is_discarded(cache: ModuleCache) -> None:
    _get(cache, "bafkreijunk")
    path, tag_path, secret = _entry(cache, "bafkreijunk")
    junk = b"not a wasmtime artifact at all"
    path.write_bytes(junk)
    tag_path.write_bytes(HEADER + _tag(secret, "bafkreijunk", junk))
    ModuleCache.forget_memory()
    assert _get(cache, "bafkreijunk") == [1]
    assert cache.stats.discarded == 1
    ModuleCache.forget_memory()
    assert _get(cache, "bafkreijunk") == []


def test_a_mac_made_with_another_directorys_secret_is_not_trusted(cache: ModuleCache) -> None:
    _get(cache, "bafkreiforeign")
    path, tag_path, _ = _entry(cache, "bafkreiforeign")
    tag_path.write_bytes(HEADER + _tag(b"\x07" * 32, "bafkreiforeign", path.read_bytes()))
    ModuleCache.forget_memory()
    assert _get(cache, "bafkreiforeign") == [1]
    assert cache.stats.discarded == 1


@pytest.mark.parametrize("load", [0.0, 99.0], ids=["every-core", "one-thread"])
@pytest.mark.parametrize("damage", ["last-byte", "last-page-cut"])
def test_a_large_artifact_is_checked_to_its_last_byte_on_every_core_or_one(
    cache: ModuleCache, damage: str, load: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past 8 MiB an artifact is hashed by BLAKE3 on every core while the load average leaves a core free (else on
    # one), through a map populated as it is made: the padding wasmtime never reads (the first load takes it as it
    # is) must still be under the tag, to the last byte, either way.
    monkeypatch.setattr(cache_module, "_load_average", lambda: load)
    monkeypatch.setattr(cache_module, "_CPUS", 2)
    chosen: list[int] = []
    decide = cache_module._hash_threads

    def spy(size: int, load: float | None, cpus: int) -> int:
        chosen.append(decide(size, load, cpus))
        return chosen[-1]

    monkeypatch.setattr(cache_module, "_hash_threads", spy)
    _get(cache, "bafkreibig")
    path, tag_path, secret = _entry(cache, "bafkreibig")
    big = path.read_bytes() + bytes(9 << 20)
    path.write_bytes(big)
    tag_path.write_bytes(HEADER + _tag(secret, "bafkreibig", big))
    ModuleCache.forget_memory()
    assert _get(cache, "bafkreibig") == []  # tagged right: deserialized, not compiled
    path.write_bytes(big[:-1] + b"\x01" if damage == "last-byte" else big[:-4096])
    ModuleCache.forget_memory()
    assert _get(cache, "bafkreibig") == [1]
    assert cache.stats.discarded == 1
    threaded = int(blake3.AUTO) if load == 0.0 else 1
    assert threaded in chosen  # the large artifact's check took the path this case names
