"""What the lakehouse needs of an S3-API store, asked once when it opens its root there.

A store that lacks one of these fails a run deep inside, with an error that does not name the
store (obstore's ``501 NotImplemented``, Spark's ``FileNotFoundException`` on a checkpoint). The
probe writes a few small objects under ``<root>/_probe-<uuid>``, checks each capability (one
function each, below: reads and listings as pyarrow makes them, conditional create and replace,
server-side copy, folder markers, multi-object delete), removes them, and refuses a store that
lacks any with one :class:`~lakehouse_assets.errors.ConfigurationError` line naming the endpoint,
what is missing and the way out. It leaves nothing but, at most, an empty marker of the root
(``<root>/``), which pyarrow puts in place of the folder marker it deletes. The outcome is kept
per endpoint and bucket for the process; a store out of reach is asked again next time.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import uuid
from collections.abc import Callable

import obstore
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import S3Store

from lakehouse_assets.errors import ConfigurationError
from lakehouse_assets.location import Location, ObjectStore, s3_store

#: The way out named when a store lacks a capability.
WAY_OUT = ("use an S3-API server with conditional writes and multi-object delete "
           "(AWS S3, MinIO, s3proxy 4.x with the filesystem-nio2 backend)")

# Outcomes so far, per (endpoint, bucket): None for a store that passed, else the refusal.
_probed: dict[tuple[str | None, str], str | None] = {}
_lock = threading.Lock()


def probe_store(root: Location) -> None:
    """Check once per process that the store holding ``root`` offers what the lakehouse needs;
    a :class:`ConfigurationError` of one line when it does not. Nothing for a local root."""
    if root.is_local:
        return
    bucket, _, key = root.path.partition("/")
    cache_key = (root.store.endpoint_url, bucket)
    with _lock:  # one probe per store at a time; the others wait for its outcome
        if cache_key not in _probed:
            refusal, cache = _probe(root, bucket, key.strip("/"))
            if not cache:
                raise ConfigurationError(refusal)
            _probed[cache_key] = refusal
        refusal = _probed[cache_key]
    if refusal is not None:
        raise ConfigurationError(refusal)


def _probe(root: Location, bucket: str, root_key: str) -> tuple[str | None, bool]:
    """The refusal (None when the store passed), and whether to keep it for the process."""
    store = root.store
    where = (f"The object store at {store.endpoint_url}" if store.endpoint_url
             else f"AWS S3{f' ({store.region})' if store.region else ''}") + f" (bucket {bucket}, root {root})"
    objects = _probe_objects(root.store, bucket)
    scratch = root / f"_probe-{uuid.uuid4().hex}"
    prefix = f"{root_key}/{scratch.name}" if root_key else scratch.name
    try:
        obstore.put(objects, f"{prefix}/object", b"probe")
    except Exception as error:  # noqa: BLE001 - whatever failed, the store is out of reach
        return (f"{where} cannot be written ({_summary(error)}): check AWS_ENDPOINT_URL, the bucket and the "
                "AWS credentials the lakehouse is given"), False
    try:
        missing = [problem for check in _CHECKS if (problem := _ask(check, objects, scratch, prefix)) is not None]
    finally:
        leftover = _clean_up(objects, scratch, prefix)
    if not missing:
        return None, True
    left = f" (the probe's objects under {scratch} could not be removed: {leftover})" if leftover else ""
    return (f"{where} lacks what the lakehouse needs: {'; '.join(missing)}{left}. "
            f"To run the lakehouse there, {WAY_OUT}."), True


def _read(objects: S3Store, scratch: Location, prefix: str) -> str | None:
    if (scratch / "object").read_text() != "probe":
        return "reads (an object read back as pyarrow reads differs from what was put)"
    return None


def _list(objects: S3Store, scratch: Location, prefix: str) -> str | None:
    if [found.relative_path for found in scratch.files()] != ["object"]:
        return "listings (a listing of a folder as pyarrow lists does not show the one object put there)"
    return None


def _create(objects: S3Store, scratch: Location, prefix: str) -> str | None:
    key = f"{prefix}/created"
    obstore.put(objects, key, b"first", mode="create")
    try:
        obstore.put(objects, key, b"second", mode="create")
    except AlreadyExistsError:
        return None
    return ("conditional create (a second put with If-None-Match: * replaced the object instead of failing with "
            "412 Precondition Failed; table locks and Delta commits rely on it)")


def _replace(objects: S3Store, scratch: Location, prefix: str) -> str | None:
    key = f"{prefix}/replaced"
    first = str(obstore.put(objects, key, b"first")["e_tag"])
    obstore.put(objects, key, b"second", mode={"e_tag": first})
    try:
        obstore.put(objects, key, b"third", mode={"e_tag": first})
    except PreconditionError:
        return None
    return ("conditional replace (a put with If-Match of a version no longer there replaced the object instead of "
            "failing with 412 Precondition Failed; table locks are renewed and taken over with it)")


def _copy(objects: S3Store, scratch: Location, prefix: str) -> str | None:
    obstore.copy(objects, f"{prefix}/object", f"{prefix}/copied")
    if bytes(obstore.get(objects, f"{prefix}/copied").bytes()) != b"probe":
        return "server-side copy (a copy differs from its source; S3A renames Spark's checkpoint files by copying)"
    return None


def _folder_marker(objects: S3Store, scratch: Location, prefix: str) -> str | None:
    # obstore cannot name a key that ends in "/"; pyarrow puts "<folder>/" as S3A's mkdirs does.
    scratch.fs.create_dir((scratch / "folder").path, recursive=False)
    listed = obstore.list_with_delimiter(objects, f"{prefix}/folder")  # as S3A's getFileStatus lists
    if listed["objects"] or listed["common_prefixes"]:
        return None
    return ("folder markers (an empty object whose key ends in / is not listed under its own prefix, so S3A does not "
            "find a folder it has just made and Spark's checkpoints fail with FileNotFoundException)")


def _multi_object_delete(objects: S3Store, scratch: Location, prefix: str) -> str | None:
    mine = [f"{prefix}/{name}" for name in ("object", "created", "replaced", "copied")]
    obstore.delete(objects, mine)
    left = {str(meta["path"]) for batch in obstore.list(objects, prefix + "/") for meta in batch} & set(mine)
    if left:
        return (f"multi-object delete (POST ?delete answered, but {len(left)} of its {len(mine)} objects "
                "are still there)")
    return None


_Check = Callable[[S3Store, Location, str], "str | None"]
# Each check, in the order asked, and its name for when the store refuses a request of it.
_CHECKS: dict[_Check, str] = {
    _read: "reads (GET, as pyarrow reads)", _list: "listings (ListObjectsV2, as pyarrow lists)",
    _create: "conditional create (If-None-Match: *)", _replace: "conditional replace (If-Match)",
    _copy: "server-side copy", _folder_marker: "folder markers",
    _multi_object_delete: "multi-object delete (POST ?delete)",
}


def _ask(check: _Check, objects: S3Store, scratch: Location, prefix: str) -> str | None:
    """What ``check`` found missing, or the request of it the store refused; None when it passed."""
    try:
        return check(objects, scratch, prefix)
    except Exception as error:  # noqa: BLE001 - a refused request is what the probe reports
        return f"{_CHECKS[check]} ({_summary(error)})"


def _clean_up(objects: S3Store, scratch: Location, prefix: str) -> str | None:
    """Remove the scratch folder; what could not be removed, if anything. pyarrow deletes it: the
    folder marker is a key ending in "/", which obstore cannot name, and pyarrow's delete also
    removes what obstore's multi-object delete left (it sends another checksum header)."""
    problems = []
    try:
        scratch.fs.delete_dir(scratch.path)
    except FileNotFoundError:
        pass
    except Exception as error:  # noqa: BLE001 - reported with the refusal, not raised over it
        problems.append(_summary(error))
    try:
        if not any(batch for batch in obstore.list(objects, prefix + "/")):
            return None
    except Exception as error:  # noqa: BLE001 - reported with the refusal, not raised over it
        problems.append(_summary(error))
    return "; ".join(problems) or "they are still listed"


def _probe_objects(store: ObjectStore, bucket: str) -> S3Store:
    """The lakehouse's client of the bucket, but giving up after two quick retries: a server that
    answers 501 would otherwise be asked ten times, over seconds, before the probe could say so."""
    return s3_store(store, bucket, {"connect_timeout": "5s", "timeout": "30s"},
                    retry_config={"max_retries": 2, "retry_timeout": dt.timedelta(seconds=10),
                                  "backoff": {"init_backoff": dt.timedelta(milliseconds=50),
                                              "max_backoff": dt.timedelta(seconds=1), "base": 2}})


def _summary(error: BaseException) -> str:
    """One line saying what a request got: the method, status and S3 error code obstore reports,
    else the error's first line."""
    text = str(error)
    answer = re.search(r"Error performing (\w+) .*? status code: (\d{3}[^:<]*)", text)
    code = re.search(r"<Code>([^<]+)</Code>", text)
    if answer:
        return f"{answer.group(1)} answered {answer.group(2).strip()}" + (f", {code.group(1)}" if code else "")
    first = " ".join(text.split("\n", 1)[0].split())
    return f"{type(error).__name__}: {first[:200]}" if first else type(error).__name__


__all__ = ["WAY_OUT", "probe_store"]
