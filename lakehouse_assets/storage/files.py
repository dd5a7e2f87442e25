"""The lakehouse's own files, on a local disk or an S3-API object store, through pyarrow's file
systems: listing landing folders, reading and writing small files (stored schemas), looking at
tables' and checkpoints' folders.

Spark and Delta Lake's connector reach the store through S3A; these files are reached from
Python without Spark, by pyarrow's S3 file system. It takes its credentials, region and
endpoint from the same AWS variables (``AWS_ACCESS_KEY_ID``, ``AWS_REGION``,
``AWS_ENDPOINT_URL``, a profile or an instance role) as delta-rs does, and lists a prefix in
pages of 1,000 keys as S3's ListObjectsV2 gives them.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import tempfile
import unicodedata
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlparse

import pyarrow.fs as pafs

from lakehouse_assets.settings import ObjectStore

#: URI schemes of S3-API object storage: ``s3a://`` as Hadoop names it, ``s3://`` as AWS does.
OBJECT_STORE_SCHEMES = ("s3a", "s3", "s3n")


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
    """A path on a file system: ``fs`` and the path as that file system names it
    (``/abs/folder`` on a local disk, ``bucket/prefix`` on an object store)."""

    fs: pafs.FileSystem
    path: str

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def child(self, *parts: str) -> Location:
        return Location(self.fs, "/".join([self.path.rstrip("/"), *parts]))

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
        data = text.encode("utf-8")
        if not self.is_local:
            with self.fs.open_output_stream(self.path) as stream:
                stream.write(data)
            return
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temp, self.path)
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise

    def create_text(self, text: str) -> bool:
        """Write the file whole unless it exists; whether this call wrote it. On a local disk
        of two writers exactly one succeeds (the file is linked into place). On an object
        store the check and the put are two requests: two writers at once are kept apart by
        the table's lock, as its commits are."""
        if not self.is_local:
            if self.exists():
                return False
            self.write_text(text)
            return True
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode("utf-8"))
            os.link(temp, self.path)
        except FileExistsError:
            return False
        finally:
            os.unlink(temp)
        return True

    def names(self) -> list[str]:
        """The names of the files and folders directly in this folder (none when it is missing)."""
        selector = pafs.FileSelector(self.path, recursive=False, allow_not_found=True)
        return sorted({info.base_name for info in self.fs.get_file_info(selector)})

    def files(self, *, recursive: bool = True) -> list[StoredFile]:
        """The files under this folder, at any depth with ``recursive``, in no particular order;
        none when the folder is missing. On an object store this is one listing of the prefix,
        page after page, whatever the depth."""
        root = self.path.rstrip("/")
        selector = pafs.FileSelector(root, recursive=recursive, allow_not_found=True)
        entries = self.fs.get_file_info(selector)
        # Some S3-API servers backed by a file system (s3proxy) list a folder twice: as the
        # folder and as an object of its own name. It is a folder.
        folders = {info.path for info in entries if info.type == pafs.FileType.Directory}
        return [StoredFile(info.path[len(root) + 1:], int(info.size or 0), int(info.mtime_ns or 0))
                for info in entries if info.type == pafs.FileType.File and info.path not in folders]

    def uri(self, relative_path: str = "") -> str:
        """The address of this location (or of ``relative_path`` under it) as Spark names it:
        ``file:/abs/path`` on a local disk (see :func:`spark_file_uri`), ``s3a://bucket/key``
        on an object store."""
        path = "/".join(part for part in (self.path.rstrip("/"), relative_path) if part)
        return spark_file_uri(path) if self.is_local else f"s3a://{path}"


def locate(uri: str) -> Location:
    """The file system and path of a local path, a ``file:`` URI or an object store's
    ``s3a://``/``s3://`` URI. Any other scheme is refused by name."""
    parsed = urlparse(uri.strip())
    scheme = parsed.scheme.lower()
    if scheme in ("", "file"):
        return Location(pafs.LocalFileSystem(), local_path(uri))
    if scheme in OBJECT_STORE_SCHEMES:
        return Location(_object_store(), f"{parsed.netloc}{unquote(parsed.path)}".rstrip("/"))
    raise ValueError(f"{uri}: the lakehouse reads local paths and S3-API object storage "
                     f"({', '.join(f'{s}://' for s in OBJECT_STORE_SCHEMES)}), not {scheme}://")


def _object_store() -> pafs.FileSystem:
    return _s3_file_system(ObjectStore.from_env(os.environ))


@functools.lru_cache(maxsize=4)
def _s3_file_system(store: ObjectStore) -> pafs.FileSystem:
    # The endpoint and region as S3A is given them; the credentials from pyarrow's own AWS
    # chain. Its addresses are path-style, as S3A's are for a custom endpoint.
    if store.endpoint_url is None:
        return pafs.S3FileSystem(region=store.region)
    endpoint = urlparse(store.endpoint_url)
    return pafs.S3FileSystem(region=store.region or "us-east-1", scheme=endpoint.scheme,
                             endpoint_override=endpoint.netloc + endpoint.path.rstrip("/"))


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
