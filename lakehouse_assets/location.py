"""Where a file or folder of the lakehouse is: a local path, or a key on S3-API object storage,
and how to reach it from Python without Spark.

Spark reaches the store through S3A. The lakehouse's own files are read and listed by pyarrow's
file systems (which also read Parquet), and written and deleted on a store by obstore (the
``object_store`` crate delta-rs commits with): pyarrow cannot send S3's conditional headers
(``If-None-Match``, ``If-Match``), puts a small file in three requests, and leaves a folder
marker behind a deleted file. All are given the same endpoint and region (:class:`ObjectStore`);
each takes its credentials from its own AWS chain.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import tempfile
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlparse

import obstore
import pyarrow.fs as pafs
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import S3Store

from lakehouse_assets.errors import ConfigurationError

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config

#: URI schemes of S3-API object storage: ``s3a://`` as Hadoop names it (and the lakehouse
#: writes it), ``s3://`` as AWS does.
OBJECT_STORE_SCHEMES = ("s3a", "s3", "s3n")


@dataclass(frozen=True)
class ObjectStore:
    """How S3-API object storage is reached, from the variables every AWS tool reads:
    ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``) for a store other than AWS, reached with
    path-style addresses as local and most S3-compatible servers need, and ``AWS_REGION`` (or
    ``AWS_DEFAULT_REGION``). Credentials are not held here: S3A and delta-rs read
    ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` (or a profile, or an instance role)
    themselves, so no secret is copied into Spark's settings, which its UI and logs show."""

    endpoint_url: str | None = None
    region: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ObjectStore:
        endpoint = (env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or "").strip() or None
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"AWS_ENDPOINT_URL must be an http:// or https:// URL such as http://127.0.0.1:9000, got {endpoint!r}")
        region = (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "").strip() or None
        return cls(endpoint_url=endpoint, region=region)

    def delta_rs_options(self) -> dict[str, str]:
        """delta-rs's storage options for the store: the endpoint (plain HTTP allowed when the
        endpoint says so) and region; its credentials are its own AWS chain's, as S3A's are."""
        options = {}
        if self.endpoint_url is not None:
            options["AWS_ENDPOINT_URL"] = self.endpoint_url
            options["AWS_ALLOW_HTTP"] = str(self.endpoint_url.startswith("http://")).lower()
        if self.region is not None:
            options["AWS_REGION"] = self.region
        return options

    def hadoop_conf(self) -> dict[str, str]:
        """S3A's settings (``fs.s3a.*``) for Spark's Hadoop configuration."""
        # S3A 3.5.0 reads with its new analytics stream by default, reported to grow the heap
        # of long-lived processes such as the engine; the classic stream is the proven one.
        conf = {"fs.s3a.input.stream.type": "classic"}
        if self.endpoint_url is not None:
            conf["fs.s3a.endpoint"] = self.endpoint_url
            conf["fs.s3a.path.style.access"] = "true"
            conf["fs.s3a.connection.ssl.enabled"] = str(self.endpoint_url.startswith("https://")).lower()
        if self.region is not None:
            conf["fs.s3a.endpoint.region"] = self.region
        return conf


@dataclass(frozen=True)
class StoredFile:
    """A file found under a folder: its path below the folder (``a/b.json``), size and last
    modification (nanoseconds since the epoch; whole seconds on S3)."""

    relative_path: str
    size: int
    mtime_ns: int

    @property
    def modified(self) -> dt.datetime:
        seconds, nanoseconds = divmod(self.mtime_ns, 1_000_000_000)
        return dt.datetime.fromtimestamp(seconds, dt.UTC) + dt.timedelta(microseconds=nanoseconds // 1000)


@dataclass(frozen=True)
class Location:
    """A file or folder: an absolute local path (``/data/lake/bronze``), or an object store's
    key as Spark names it (``s3a://bucket/lake/bronze``), with how that store is reached.

    ``str()`` gives the location as Spark, delta-rs and the user read it; ``/`` a location
    below it. Methods look at the files there alike on a disk and on a store.
    """

    uri: str
    store: ObjectStore = field(default_factory=lambda: ObjectStore(), compare=False, repr=False)

    def __str__(self) -> str:
        return self.uri

    def __fspath__(self) -> str:
        # A local location opens as a path (open(), shutil, pathlib); on a store that would
        # make a local folder named after the URL.
        return str(self.local("opening it as a local path"))

    def __truediv__(self, part: str) -> Location:
        """The location ``part`` (a name, or names joined by ``/``) below this one."""
        return Location(f"{self.uri.rstrip('/')}/{part}", self.store)

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        return Location(self.uri.rstrip("/").rsplit("/", 1)[0] or "/", self.store)

    @property
    def is_local(self) -> bool:
        return "://" not in self.uri

    @property
    def fs(self) -> pafs.FileSystem:
        """The file system holding this location."""
        return pafs.LocalFileSystem() if self.is_local else _s3_file_system(self.store)

    @property
    def delta_rs_options(self) -> dict[str, str] | None:
        """delta-rs's storage options to reach this location (none on a local disk)."""
        return None if self.is_local else self.store.delta_rs_options() or None

    @property
    def path(self) -> str:
        """The location as its file system names it: the local path, or ``bucket/key``."""
        return self.uri if self.is_local else self.uri.split("://", 1)[1]

    def local(self, purpose: str) -> Path:
        """The local path, for what only a local disk offers (``purpose`` names it); on object
        storage, a :class:`ConfigurationError` saying so."""
        if not self.is_local:
            raise ConfigurationError(
                f"{purpose} needs the lakehouse on a local disk, and {self.uri} is on object storage: "
                "set LAKEHOUSE_ROOT to a local folder for it")
        return Path(self.uri)

    def remove(self) -> None:
        """Delete this folder and everything in it (or this file); nothing when it is missing."""
        if not self.is_local:
            # pyarrow would leave a marker of the parent folder behind; a store has no folders.
            bucket, key = self._bucket_key()
            objects = s3_objects(self.store, bucket)
            below = [str(meta["path"]) for batch in obstore.list(objects, key.rstrip("/") + "/") for meta in batch]
            obstore.delete(objects, [*below, key])
            return
        info = self.fs.get_file_info(self.path)
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(self.path)
        elif info.type == pafs.FileType.File:
            self.fs.delete_file(self.path)

    def mkdir(self) -> None:
        """Make the folder (and its parents) on a local disk; an object store has no folders."""
        if self.is_local:
            os.makedirs(self.uri, exist_ok=True)

    def exists(self) -> bool:
        return bool(self.fs.get_file_info(self.path).type != pafs.FileType.NotFound)

    def is_dir(self) -> bool:
        """Whether a folder is here: on an object store, whether any key lies below the path."""
        return bool(self.fs.get_file_info(self.path).type == pafs.FileType.Directory)

    def is_empty_or_missing(self) -> bool:
        info = self.fs.get_file_info(self.path)
        if info.type == pafs.FileType.NotFound:
            return True
        if info.type != pafs.FileType.Directory:
            return False
        return not self.fs.get_file_info(pafs.FileSelector(self.path, recursive=False))

    def read_text(self) -> str:
        with self.fs.open_input_stream(self.path) as stream:
            return str(stream.read().decode("utf-8"))

    def write_text(self, text: str) -> None:
        """Write the file whole: readers see the old content or the new, never a part (a local
        file is written beside and renamed over; an object is put in one request)."""
        self.write_bytes(text.encode("utf-8"))

    def write_bytes(self, data: bytes) -> None:
        """Write the file whole, as :meth:`write_text` does."""
        if not self.is_local:
            bucket, key = self._bucket_key()
            obstore.put(s3_objects(self.store, bucket), key, data)
            return
        self._write_beside(data, os.replace)

    def create_text(self, text: str) -> str | None:
        """Write the file whole unless it exists: its :meth:`version` when this call wrote it,
        None when a file was there. Of two writers at once exactly one succeeds: a local file is
        linked into place, an object is put with ``If-None-Match: *``."""
        data = text.encode("utf-8")
        if not self.is_local:
            bucket, key = self._bucket_key()
            try:
                return str(obstore.put(s3_objects(self.store, bucket), key, data, mode="create")["e_tag"])
            except AlreadyExistsError:
                return None
        try:
            self._write_beside(data, os.link)
        except FileExistsError:
            return None
        return self.version()

    def _write_beside(self, data: bytes, place: Callable[[str, str], None]) -> None:
        """Write a local file's ``data`` to a temporary file beside it, then ``place`` that there."""
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            place(temp, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)  # gone once renamed into place

    def version(self) -> str | None:
        """What identifies the file's present content (an object's ETag; a local file's time and
        size), or None when there is none."""
        try:
            if not self.is_local:
                bucket, key = self._bucket_key()
                return str(obstore.head(s3_objects(self.store, bucket), key)["e_tag"])
            stat = os.stat(self.path)
        except FileNotFoundError:
            return None
        return f"{stat.st_mtime_ns}-{stat.st_size}"

    def replace_text(self, text: str, *, version: str) -> str | None:
        """Replace the file whole only if it is still at ``version``: its new version, or None
        when another writer changed or removed it first. On object storage only (a put with
        ``If-Match``): a local disk offers locks instead."""
        if self.is_local:
            raise ConfigurationError(f"{self.uri}: replacing a file only if it is unchanged is offered on "
                                     "object storage only")
        bucket, key = self._bucket_key()
        try:
            written = obstore.put(s3_objects(self.store, bucket), key, text.encode("utf-8"),
                                  mode={"e_tag": version})
        except (PreconditionError, FileNotFoundError):
            return None
        return str(written["e_tag"])

    def _bucket_key(self) -> tuple[str, str]:
        bucket, _, key = self.path.partition("/")
        return bucket, key

    def file(self) -> StoredFile | None:
        """The file here (its name, size and time), or None when there is none."""
        info = self.fs.get_file_info(self.path)
        if info.type != pafs.FileType.File:
            return None
        return StoredFile(self.name, int(info.size or 0), int(info.mtime_ns or 0))

    def names(self) -> list[str]:
        """The names of the files and folders directly in this folder (none when it is missing)."""
        selector = pafs.FileSelector(self.path, recursive=False, allow_not_found=True)
        return sorted({info.base_name for info in self.fs.get_file_info(selector)})

    def folders(self) -> list[str]:
        """The names of the folders directly in this folder, sorted (none when it is missing)."""
        selector = pafs.FileSelector(self.path, recursive=False, allow_not_found=True)
        return sorted({info.base_name for info in self.fs.get_file_info(selector)
                       if info.type == pafs.FileType.Directory})

    def files(self, *, recursive: bool = True) -> list[StoredFile]:
        """The files under this folder, at any depth with ``recursive``, in no particular order;
        none when the folder is missing. On an object store this is one listing of the prefix,
        page after page, whatever the depth."""
        root = self.path.rstrip("/")
        selector = pafs.FileSelector(root, recursive=recursive, allow_not_found=True)
        return [StoredFile(info.path[len(root) + 1:], int(info.size or 0), int(info.mtime_ns or 0))
                for info in self.fs.get_file_info(selector) if info.type == pafs.FileType.File]

    def uri_of(self, relative_path: str) -> str:
        """The address of a file below this folder as Spark names it: ``file:/abs/path`` on a
        local disk (see :func:`spark_file_uri`), ``s3a://bucket/key`` on an object store."""
        path = f"{self.uri.rstrip('/')}/{relative_path}"
        return spark_file_uri(path) if self.is_local else path


def locate(uri: str | os.PathLike[str], store: ObjectStore | None = None) -> Location:
    """A location as it is; the location of a local path, a ``file:`` URI, or an object store's
    ``s3a://`` or ``s3://`` URI, reached through ``store`` (the lakehouse resource's: one on a
    store without it is refused). Any other scheme is refused by name."""
    if isinstance(uri, Location):
        return uri
    text = str(uri).strip()
    parsed = urlparse(text)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file"):
        return Location(os.path.abspath(local_path(text)), store or ObjectStore())
    if scheme in OBJECT_STORE_SCHEMES:
        if not parsed.netloc:
            raise ConfigurationError(f"{text}: name the bucket, as in s3a://bucket/prefix")
        if store is None:
            raise ConfigurationError(f"{text} is on object storage: give the lakehouse resource's store with it, "
                                     "or a Location under the lakehouse's root")
        return Location(f"s3a://{parsed.netloc}{unquote(parsed.path)}".rstrip("/"), store)
    raise ConfigurationError(f"{text}: the lakehouse reads local paths and S3-API object storage "
                             f"({', '.join(f'{s}://' for s in OBJECT_STORE_SCHEMES)}), not {scheme}://")


@functools.lru_cache(maxsize=4)
def _s3_file_system(store: ObjectStore) -> pafs.FileSystem:
    # The endpoint and region as S3A is given them; the credentials from pyarrow's own AWS
    # chain. Its addresses are path-style, as S3A's are for a custom endpoint.
    if store.endpoint_url is None:
        return pafs.S3FileSystem(region=store.region)
    endpoint = urlparse(store.endpoint_url)
    return pafs.S3FileSystem(region=store.region or "us-east-1", scheme=endpoint.scheme,
                             endpoint_override=endpoint.netloc + endpoint.path.rstrip("/"))


def s3_store(store: ObjectStore, bucket: str, client_options: ClientConfig | None = None,
             **options: Any) -> S3Store:
    """obstore's client of ``bucket`` on ``store`` (``client_options`` and ``options``: more of
    S3Store's settings); obstore reads the credentials from the AWS variables itself, as delta-rs does."""
    config: S3Config = {}
    if store.endpoint_url is not None:
        config["endpoint"] = store.endpoint_url
    if store.region is not None:
        config["region"] = store.region
    allow_http = store.endpoint_url is not None and store.endpoint_url.startswith("http://")
    return S3Store(bucket, config=config, client_options={**(client_options or {}), "allow_http": allow_http},
                   **options)


s3_objects = functools.lru_cache(maxsize=16)(s3_store)


def table_file_path(table_path: str, relative: str) -> str:
    """A data file's path as the log lists it (URL-encoded, relative to the table, or an
    absolute URI), made absolute."""
    if "://" in relative or relative.startswith("/"):
        return relative
    return f"{table_path.rstrip('/')}/{unquote(relative)}"


def local_path(path_or_uri: str) -> str:
    """A ``file:`` URI (``file:/abs``, ``file:///abs``, URL-encoded) or a local path as a local
    path; any other URI as it is."""
    parsed = urlparse(path_or_uri.strip())
    if parsed.scheme not in ("file", ""):
        return path_or_uri
    return unquote(parsed.path).rstrip("/") or parsed.path


def spark_file_uri(path: str) -> str:
    """A local file's path as Spark's ``_metadata.file_path`` spells it (``file:/abs/path``), so
    paths from listings, checkpoints and bronze rows compare equal; a URI as it is."""
    if path.startswith("file:"):
        path = unquote(urlparse(path).path)
    elif "://" in path:
        return path
    # java.net.URI keeps non-ASCII characters as they are, except spaces and controls.
    return "file:" + "".join(c if _uri_keeps(c) else quote(c, safe="/:@!$&'()*+,;=~") for c in path)


def _uri_keeps(ch: str) -> bool:
    return ord(ch) > 127 and not unicodedata.category(ch).startswith(("Z", "Cc"))
