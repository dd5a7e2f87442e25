"""File-system access for table paths, local or remote, through pyarrow's file systems."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs


@dataclass(frozen=True)
class Location:
    """A path on a file system: ``fs`` and the path as that file system names it."""

    fs: pafs.FileSystem
    path: str

    def child(self, *parts: str) -> Location:
        return Location(self.fs, "/".join([self.path.rstrip("/"), *parts]))

    def exists(self) -> bool:
        return bool(self.fs.get_file_info(self.path).type != pafs.FileType.NotFound)

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


def locate(uri: str) -> Location:
    """The file system and path of a table URI or a local path."""
    if "://" not in uri:
        return Location(pafs.LocalFileSystem(), uri)
    fs, path = pafs.FileSystem.from_uri(uri)
    return Location(fs, path)


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
