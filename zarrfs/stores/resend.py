"""PUTs and DELETEs whose connection failed before an answer, sent again; a PUT recognised when
the retry finds it had landed.

obstore retries a request that met a 5xx or could not connect, but not one it does not take for
idempotent whose connection failed after it was sent (a reset while the body went out, a
connection closed before the answer): a conditional PUT (If-Match, If-None-Match), and S3's
DELETE, which is a batch `POST ?delete`. Losing them there failed a write-back for a reset that
a retry survives, so they are sent again here: TRIES in all, with backoff, none started after
`patience` seconds (half the request timeout, as obstore's own retries).

A DELETE sent twice deletes once. A PUT sent twice may meet its own first attempt: a refusal
(412, or AlreadyExists for If-None-Match) after an attempt whose fate is unknown is looked into,
and when the object stored holds exactly our bytes the earlier attempt landed and the PUT
succeeded, with the stored version; otherwise another writer's value is there, and the refusal
stands (a conflict, which the write-back merges).
"""

import errno
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import obstore
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import ObjectStore

from zarrfs.errors import StoreError
from zarrfs.stores import bounded_get
from zarrfs.stores.remote_errors import unanswered

if TYPE_CHECKING:  # obstore's typed dicts exist in its stubs only
    from obstore import GetOptions, PutMode, PutResult

log = logging.getLogger(__name__)

TRIES = 4  # attempts of one request whose connection fails
BACKOFF = 0.1  # seconds before the first retry, doubled before each next
T = TypeVar("T")  # what a request sent again returns


def put(store: ObjectStore, key: str, data: bytes, mode: "PutMode", patience: float) -> "PutResult":
    """obstore.put of `data` at `key` with `mode` ("create", "overwrite" or a version), sent
    again when the connection fails; returns the stored version's meta (e_tag, version). Raises
    PreconditionError or AlreadyExistsError when another writer's value is stored, and obstore's
    error for anything else."""
    tried: list[int] = []  # attempts made whose fate is unknown

    def attempt() -> "PutResult":
        try:
            return obstore.put(store, key, data, mode=mode, use_multipart=False)
        except (PreconditionError, AlreadyExistsError):
            landed = _landed(store, key, data) if tried else None
            if landed is None:
                raise
            log.info("PUT %s: an attempt whose connection failed had stored it", key)
            return landed
        except Exception:
            tried.append(1)
            raise

    return _resent("PUT", key, attempt, patience)


def delete(store: ObjectStore, key: str, patience: float) -> None:
    """obstore.delete of `key`, sent again when the connection fails (a key gone is no error)."""
    _resent("DELETE", key, lambda: obstore.delete(store, key), patience)


def _resent(method: str, key: str, call: Callable[[], T], patience: float) -> T:
    started = time.monotonic()
    for attempt in range(TRIES):
        try:
            return call()
        except Exception as e:
            delay = BACKOFF * 2 ** attempt
            if not unanswered(e) or attempt + 1 == TRIES or time.monotonic() - started + delay > patience:
                raise
            log.info("%s %s: the connection failed before an answer; sending it again in %.1f s", method, key, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")  # the last attempt returns or raises


def _landed(store: ObjectStore, key: str, data: bytes) -> "PutResult | None":
    """The version stored at `key` when it holds exactly `data` (read back, bounded by our own
    size), else None: whatever fails here leaves the refusal standing, which is safe (a merge)."""
    try:
        meta = obstore.head(store, key)
        if meta["size"] != len(data):
            return None
        if data:
            options: GetOptions = {"range": (0, len(data))}
            if meta.get("e_tag"):
                options["if_match"] = meta["e_tag"]
            answer = obstore.get(store, key, options=options)  # taken only as far as our own size
            if bytes(bounded_get.body(key, answer, len(data), _unexplained)) != data:
                return None
    except Exception as e:
        log.debug("PUT %s: cannot read it back to see whether it landed: %s", key, str(e).splitlines()[0][:200])
        return None
    return {"e_tag": meta["e_tag"], "version": meta["version"]}


def _unexplained(what: str, key: str, error: BaseException) -> StoreError:
    """A read-back that broke off: no more is needed than that it did (the refusal stands)."""
    return StoreError(f"{what} {key!r}: {type(error).__name__}", errno.EIO)
