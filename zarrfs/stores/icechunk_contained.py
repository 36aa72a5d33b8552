"""A local Icechunk repository's own objects held to the containment of symlinks
(docs/semantics.md): icechunk's local storage opens whatever a symlink among them leads to.

Without -o symlinks=follow, a repository whose object directories hold a symlink is refused at
open, in one line naming it; with it, only a symlink leading under /proc, /sys or /dev is (as a
local store's symlinks, stores/contained.py). The objects are walked once, at open, with the
names and types a directory's listing gives (no stat of each); at most MAX_OBJECTS of them: a
repository of more is refused without -o symlinks=follow (its objects not all looked at), and with
it the walk stops there, in one line (a trusted repository: the rest are not looked at). A
directory among them that cannot be listed refuses the repository, in one line naming it.

Virtual chunks are read from the file:// containers icechunk_repository.virtual_containers
allows, by their locations' names: a location whose real path leaves its container (a symlink
inside it) is found when a version's store is made, said in one line, and that version's
virtual chunks are not read (icechunk says which chunk is virtual, not where it points).
"""

import errno
import logging
import os
from urllib.parse import unquote, urlsplit

from zarrfs.errors import StoreError
from zarrfs.stores.contained import never_followed_into

log = logging.getLogger(__name__)

# What icechunk's local storage writes in a repository's directory (format 2; refs/ and
# config.yaml of format 1): a virtual chunk container inside the directory is not among them.
OBJECTS = ("repo", "config.yaml", "refs", "snapshots", "manifests", "chunks", "transactions", "overwritten")
MAX_OBJECTS = 1_000_000  # a listing's names at some 2 µs each: a second or so at open


def check_objects(source: str, root: str, follow_symlinks: bool) -> None:
    """Raise StoreError (EACCES) when the repository at directory `source` holds a symlink among
    its objects that the mount may not follow."""
    walked = 0
    pending = [os.path.join(source, name) for name in OBJECTS]
    while pending:
        path = pending.pop()
        if os.path.islink(path):
            _refuse_symlink(path, root, follow_symlinks)
            continue
        try:
            with os.scandir(path) as listing:
                entries = list(listing)
        except (FileNotFoundError, NotADirectoryError):  # no such object, or a file: nothing below it
            continue
        except OSError as e:  # PermissionError above all: what it holds cannot be looked at
            raise StoreError(f"{root}: {path} cannot be listed ({e.strerror}): the repository's objects are not "
                             f"all looked at for symlinks", errno.EACCES) from None
        walked += len(entries)
        if walked > MAX_OBJECTS:
            if not follow_symlinks:
                raise StoreError(f"{root}: more than {MAX_OBJECTS} objects: not all looked at for symlinks "
                                 f"(-o symlinks=follow trusts the repository)", errno.EACCES)
            log.warning("%s: more than %d objects: the rest are not looked at for symlinks into /proc, /sys "
                        "or /dev (-o symlinks=follow trusts the repository)", root, MAX_OBJECTS)
            return
        for entry in entries:
            if entry.is_symlink():
                _refuse_symlink(entry.path, root, follow_symlinks)
            elif entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)


def _refuse_symlink(path: str, root: str, follow_symlinks: bool) -> None:
    """A symlink among the objects: refused unless followed, and then unless it leads under
    /proc, /sys or /dev."""
    target = os.path.realpath(path)
    if not follow_symlinks:
        raise StoreError(f"{root}: {path} is a symlink (to {target}): a repository's objects are not followed "
                         f"outside it (-o symlinks=follow trusts the repository)", errno.EACCES)
    refused = never_followed_into(target)
    if refused:
        raise StoreError(f"{root}: {path} leads to {target}: nothing under {refused} is followed", errno.EACCES)


def escaping_locations(locations: list[str], allowed: list[str], follow_symlinks: bool) -> list[str]:
    """The virtual chunks' file:// locations, among `locations`, that lie in an allowed container
    by name but not in fact: their real path (symlinks resolved) outside the container's, or
    with -o symlinks=follow under /proc, /sys or /dev. icechunk opens a location as named."""
    escaping = []
    for location in locations:
        prefix = next((p for p in allowed if location.startswith(p)), None)
        if prefix is None:
            continue  # in no container read: icechunk refuses it itself
        real = os.path.realpath(unquote(urlsplit(location).path))
        if follow_symlinks:
            if never_followed_into(real) is not None:
                escaping.append(location)
            continue
        within = os.path.realpath(urlsplit(prefix).path)
        if os.path.commonpath([real, within]) != within:
            escaping.append(location)
    return escaping
