"""What a trustless-gateway request asks for: response type, CAR parameters, byte ranges, cache identity.

## The one decision
Every request is read into one frozen :class:`Want` (or a :class:`Refused` with its HTTP status)
before any block is touched, following specs.ipfs.tech ``http-gateways/trustless-gateway``:

* ``?format=raw|car`` wins over ``Accept``; without ``format`` the ``Accept`` media ranges are tried
  by falling ``q`` (ties in the order written) and the first one this gateway can produce is served.
  No ``format`` and no ``Accept`` (or only ``*/*``, curl's default) → 400 (strict trustless mode:
  nothing is deserialized); an ``Accept`` that names nothing servable → 406, and so does one that
  refuses with ``q=0`` every type it names or ``*/*`` (RFC 9110 §12.4.2: ``q=0`` is "not acceptable",
  a choice the client made, not a missing one); an unknown ``format`` → 400.
* CAR parameters: ``version`` 1 only; ``order`` ``dfs`` (``unk`` is answered with the explicit
  ``dfs`` this gateway always streams); ``dups`` ``y``/``n`` (default ``n``). The ``car-version``,
  ``car-order`` and ``car-dups`` query parameters take precedence over the ``Accept`` parameters.
  A variant the gateway cannot produce is 406 when it came from ``Accept``, 400 from the query.
* ``dag-scope`` is ``block|entity|all`` (default ``all``); ``entity-bytes=from:to`` (inclusive,
  ``*`` = end, negatives count from the end) implies ``entity``; with another explicit scope it is 400.
* The ``Etag`` is a function of the request alone (CID, path, type and every CAR parameter), so
  ``If-None-Match`` is answered 304 without reading a block.

## Pure
No I/O: strings in, values out.

## Not done here
IPNS records (``application/vnd.ipfs.ipns-record``), CARv2, deserialized responses (HTML, files),
multi-range ``Range`` requests (a multi-range ``Range`` is ignored and the whole block is served,
as RFC 9110 allows).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import quote

__all__ = [
    "CAR_TYPE",
    "RAW_TYPE",
    "CarParams",
    "EntityBytes",
    "Refused",
    "Want",
    "byte_range",
    "content_disposition",
    "etag",
    "etag_matches",
    "negotiate",
]

RAW_TYPE: Final = "application/vnd.ipld.raw"
CAR_TYPE: Final = "application/vnd.ipld.car"
_FORMATS: Final = {"raw": RAW_TYPE, "car": CAR_TYPE}
_SCOPES: Final = ("block", "entity", "all")
_INT: Final = re.compile(r"-?[0-9]{1,19}")

Scope = Literal["block", "entity", "all"]


@dataclass(frozen=True, slots=True)
class EntityBytes:
    """``entity-bytes=from:to``: inclusive offsets, negatives from the end, ``to=None`` for ``*``."""

    start: int
    stop: int | None

    def resolve(self, size: int) -> tuple[int, int] | None:
        """The half-open ``[lo, hi)`` byte range of an entity of ``size`` bytes, or None if it is empty.

        >>> EntityBytes(-9999, -3).resolve(1026), EntityBytes(0, 0).resolve(10), EntityBytes(20, None).resolve(10)
        ((0, 1024), (0, 1), None)
        """
        lo = max(size + self.start, 0) if self.start < 0 else self.start
        hi = size if self.stop is None else (size + self.stop + 1 if self.stop < 0 else min(self.stop + 1, size))
        return (lo, hi) if lo < hi else None


@dataclass(frozen=True, slots=True)
class CarParams:
    """What a CAR response holds and how it is ordered (the ``Content-Type`` parameters follow)."""

    scope: Scope = "all"
    entity_bytes: EntityBytes | None = None
    dups: bool = False
    order: str = "dfs"

    @property
    def content_type(self) -> str:
        """``application/vnd.ipld.car; version=1; order=dfs; dups=n`` (or ``dups=y``)."""
        return f"{CAR_TYPE}; version=1; order={self.order}; dups={'y' if self.dups else 'n'}"


@dataclass(frozen=True, slots=True)
class Want:
    """A servable request: ``raw`` (one block) or ``car`` with its :class:`CarParams`."""

    kind: Literal["raw", "car"]
    car: CarParams | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """A request this gateway will not serve: the HTTP ``status`` and a one-line ``message``."""

    status: int
    message: str


# ---- Accept parsing


def _media_ranges(accept: str) -> tuple[list[tuple[str, dict[str, str], float]], list[str]]:
    # The acceptable ranges by falling q (ties in the order written), and the media refused with q=0.
    out: list[tuple[float, int, str, dict[str, str]]] = []
    refused: list[str] = []
    for index, item in enumerate(accept.split(",")):
        parts = [p.strip() for p in item.split(";")]
        media = parts[0].lower()
        if not media:
            continue
        params: dict[str, str] = {}
        for p in parts[1:]:
            key, _, value = p.partition("=")
            params[key.strip().lower()] = value.strip().strip('"').lower()
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 0.0
        if q > 0:
            out.append((q, index, media, params))
        else:
            refused.append(media)
    out.sort(key=lambda e: (-e[0], e[1]))
    return [(media, params, q) for q, _, media, params in out], refused


def _car_params(params: Mapping[str, str], source: str) -> CarParams | str:
    # The Accept parameters of one application/vnd.ipld.car range → CarParams, or why not.
    version = params.get("version", "1")
    if version != "1":
        return f"CAR version {version!r} is not served ({source}); only version=1"
    order = params.get("order", "dfs") or "dfs"
    if order not in ("dfs", "unk"):
        return f"CAR order {order!r} is not served ({source}); use dfs or unk"
    dups = params.get("dups", "n") or "n"
    if dups not in ("y", "n"):
        return f"CAR dups {dups!r} is not served ({source}); use y or n"
    return CarParams(dups=dups == "y")


# ---- negotiation


def _entity_bytes(text: str) -> EntityBytes | None:
    start, sep, stop = text.partition(":")
    if not sep or not _INT.fullmatch(start) or not (stop == "*" or _INT.fullmatch(stop)):
        return None
    first, last = int(start), (None if stop == "*" else int(stop))
    if last is not None and 0 <= last < first:
        return None
    return EntityBytes(first, last)


def _scope(query: Mapping[str, str], car: CarParams) -> CarParams | Refused:
    scope = query.get("dag-scope")
    if scope is not None and scope not in _SCOPES:
        return Refused(400, f"dag-scope {scope!r} is not one of block, entity, all")
    raw_range = query.get("entity-bytes")
    if raw_range is None:
        return CarParams(scope or "all", None, car.dups, car.order)  # type: ignore[arg-type]
    entity = _entity_bytes(raw_range)
    if entity is None:
        return Refused(400, f"entity-bytes {raw_range!r} is not from:to (integers, '*' for the end, from ≤ to)")
    if scope not in (None, "entity"):
        return Refused(400, f"entity-bytes implies dag-scope=entity, not {scope}")
    return CarParams("entity", entity, car.dups, car.order)


def _query_car(query: Mapping[str, str], base: CarParams) -> CarParams | Refused:
    # car-version / car-order / car-dups override what Accept said.
    given = {k[4:]: v.lower() for k, v in query.items() if k in ("car-version", "car-order", "car-dups")}
    if not given:
        return base
    merged = {"version": "1", "order": base.order, "dups": "y" if base.dups else "n"} | given
    got = _car_params(merged, "query")
    return Refused(400, got) if isinstance(got, str) else got


def negotiate(query: Mapping[str, str], accept: str | None) -> Want | Refused:
    """Read the response type and CAR parameters from the query and the ``Accept`` header.

    >>> negotiate({"format": "raw"}, None)
    Want(kind='raw', car=None)
    >>> negotiate({}, "application/vnd.ipld.car; order=dfs; dups=y").car.content_type
    'application/vnd.ipld.car; version=1; order=dfs; dups=y'
    >>> negotiate({}, None).status, negotiate({}, "text/html").status
    (400, 406)
    """
    fmt = query.get("format")
    ranges, refused = _media_ranges(accept) if accept else ([], [])
    chosen: Want | None = None
    why_not: str | None = None
    if fmt is not None:
        if fmt not in _FORMATS:
            return Refused(400, f"format {fmt!r} is not served by a trustless gateway; use raw or car")
        if fmt == "raw":
            chosen = Want("raw")
        else:
            car = CarParams()
            for media, params, _ in ranges:  # the Accept parameters still shape the CAR
                if media == CAR_TYPE:
                    got = _car_params(params, "Accept")
                    if isinstance(got, CarParams):
                        car = got
                        break
            chosen = Want("car", car)
    else:
        if all(media in ("*/*", "application/*") for media, _, _ in ranges):  # curl's default is no choice
            if refused:  # ... but q=0 is one: the client refused by name what it could have had
                return Refused(
                    406,
                    f"Accept refuses with q=0 {', '.join(refused)} and names nothing else this "
                    f"gateway serves ({RAW_TYPE}, {CAR_TYPE})",
                )
            return Refused(400, "no format and no specific Accept: ask for ?format=raw|car or Accept: " + RAW_TYPE)
        for media, params, _ in ranges:
            if media == RAW_TYPE:
                chosen = Want("raw")
                break
            if media == CAR_TYPE:
                got = _car_params(params, "Accept")
                if isinstance(got, CarParams):
                    chosen = Want("car", got)
                    break
                why_not = got
        if chosen is None:
            return Refused(406, why_not or f"Accept names nothing this gateway serves ({RAW_TYPE}, {CAR_TYPE})")
    if chosen.kind == "raw" or chosen.car is None:
        return chosen
    merged = _query_car(query, chosen.car)
    if isinstance(merged, Refused):
        return merged
    scoped = _scope(query, merged)
    return scoped if isinstance(scoped, Refused) else Want("car", scoped)


# ---- response identity


def etag(cid: str, path: str, want: Want) -> str:
    """A strong ``Etag`` for this response: the CID for a raw block, plus a digest of every CAR parameter.

    >>> etag("bafkqaaa", "", Want("raw"))
    '"bafkqaaa.raw"'
    """
    if want.kind == "raw":
        return f'"{cid}.raw"' if not path else f'"{cid}.raw.{_short(path)}"'
    car = want.car or CarParams()
    er = car.entity_bytes
    key = f"{path}|{car.scope}|{er.start if er else ''}:{er.stop if er else ''}|{car.order}|{car.dups}"
    return f'"{cid}.car.{_short(key)}"'


def _short(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def etag_matches(if_none_match: str | None, tag: str) -> bool:
    """True if an ``If-None-Match`` header names ``tag`` (weak or strong) or is ``*``."""
    if not if_none_match:
        return False
    for item in if_none_match.split(","):
        item = item.strip()
        if item == "*" or item.removeprefix("W/") == tag:
            return True
    return False


def content_disposition(filename: str | None, default: str) -> str:
    """``attachment; filename="…"``; a non-ASCII or quoted name also gets an RFC 8187 ``filename*``.

    >>> content_disposition(None, "x.bin"), content_disposition("a\\"b.bin", "x.bin")
    ('attachment; filename="x.bin"', 'attachment; filename="a_b.bin"; filename*=UTF-8\\'\\'a%22b.bin')
    """
    name = filename or default
    plain = "".join(ch if 0x20 <= ord(ch) < 0x7F and ch not in '"\\' else "_" for ch in name)
    if plain == name:
        return f'attachment; filename="{name}"'
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


_RANGE: Final = re.compile(r"bytes=(\d{0,19})-(\d{0,19})")


def byte_range(header: str | None, size: int) -> tuple[int, int] | Literal["unsatisfiable"] | None:
    """The half-open ``[lo, hi)`` of a single ``Range: bytes=…`` over ``size`` bytes.

    None means "serve the whole body" (no Range, a malformed one, or several ranges, which RFC 9110
    lets a server ignore); ``"unsatisfiable"`` means 416.

    >>> byte_range("bytes=0-1", 5), byte_range("bytes=-2", 5), byte_range("bytes=3-", 5), byte_range("bytes=9-", 5)
    ((0, 2), (3, 5), (3, 5), 'unsatisfiable')
    """
    if header is None:
        return None
    m = _RANGE.fullmatch(header.strip())
    if m is None:
        return None
    first, last = m.group(1), m.group(2)
    if first == "":
        if last == "":
            return None
        n = int(last)
        return (max(size - n, 0), size) if n > 0 and size > 0 else "unsatisfiable"
    lo = int(first)
    hi = size if last == "" else min(int(last) + 1, size)
    if last != "" and int(last) < lo:
        return None
    if lo >= size:
        return "unsatisfiable"
    return lo, hi
