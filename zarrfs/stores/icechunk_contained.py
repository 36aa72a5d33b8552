"""A local Icechunk repository's own objects held to the containment of symlinks
(docs/semantics.md): icechunk's local storage opens whatever a symlink among them leads to.

Without -o symlinks=follow, a repository whose object directories hold a symlink is refused at
open, in one line naming it; with it, only a symlink leading under /proc, /sys or /dev is (as a
local store's symlinks, stores/contained.py). The objects are walked at open, with the names and
types a directory's listing gives (no stat of each); at most MAX_OBJECTS of them: a repository
of more is refused without -o symlinks=follow (its objects not all looked at), and with it the
walk stops there, in one line (a trusted repository: the rest are not looked at). A directory
among them that cannot be listed refuses the repository, in one line naming it.

icechunk opens its objects by name, and takes no descriptor nor flag from us: a symlink made
after the walk would be followed. So each directory walked is watched (inotify, from before it
is listed), and WatchedObjects.check, which the repository's loop calls before each call into
icechunk, looks at every entry made or moved into one since: a symlink the mount may not follow
refuses that call and every later one while it is there (EACCES, one line naming it), a new
directory is walked and watched. A symlink made between that look and icechunk's open of the
file is not seen: the watch narrows the window, only icechunk could close it. Nor is one
another machine makes on a network or FUSE file system: inotify sees this kernel's changes.

Virtual chunks are read from the file:// containers icechunk_repository.virtual_containers
allows, by their locations' names: a location whose real path leaves its container (a symlink
inside it) is found when a version's store is made, said in one line, and that version's
virtual chunks are not read (icechunk says which chunk is virtual, not where it points).
"""

import errno
import logging
import os
import threading
from urllib.parse import unquote, urlsplit

from zarrfs.errors import StoreError
from zarrfs.stores.contained import never_followed_into

log = logging.getLogger(__name__)

# What icechunk's local storage writes in a repository's directory (format 2; refs/ and
# config.yaml of format 1): a virtual chunk container inside the directory is not among them.
OBJECTS = ("repo", "config.yaml", "refs", "snapshots", "manifests", "chunks", "transactions", "overwritten")
MAX_OBJECTS = 1_000_000  # a listing's names at some 2 µs each: a second or so at open
NEEDS_INOTIFY = "a local Icechunk repository is watched for symlinks with inotify_simple: pip install 'zarrfs[icechunk]'"


def check_objects(source: str, root: str, follow_symlinks: bool) -> "WatchedObjects":
    """Raise StoreError (EACCES) when the repository at directory `source` holds a symlink among
    its objects that the mount may not follow; else the watch that keeps them so."""
    return WatchedObjects(source, root, follow_symlinks)


class WatchedObjects:
    """The objects of the repository at directory `source` (`root` names it in messages), walked
    at open and watched from then on: check() before each call into icechunk."""

    def __init__(self, source: str, root: str, follow_symlinks: bool):
        try:
            from inotify_simple import INotify
        except ImportError:
            raise StoreError(NEEDS_INOTIFY, errno.EOPNOTSUPP) from None
        self._source, self._root, self._follow_symlinks = source, root, follow_symlinks
        self._lock = threading.Lock()  # one reader of the events at a time
        self._directories: dict[int, str] = {}  # watch descriptor -> the directory it watches
        self._refused: dict[str, str] = {}  # symlinks found, while they are there -> why refused
        self._walked = 0
        self._cut_short = False  # past MAX_OBJECTS with -o symlinks=follow: directories no longer listed
        self._lost = False  # events read and not all looked at (a check failed): everything looked at again
        try:
            self._inotify = INotify()
        except OSError as e:  # EMFILE: fs.inotify.max_user_instances
            raise StoreError(f"{root}: its objects cannot be watched for symlinks ({e.strerror}: "
                             f"fs.inotify.max_user_instances)", errno.EACCES) from None
        try:
            self._watch(source, follow=True)  # SOURCE itself may be a symlink, as a local store's may
            self._walk_objects()
            self._refuse_found()
        except BaseException:
            self._inotify.close()
            raise

    def check(self) -> None:
        """The entries made in the watched directories since the last check looked at: StoreError
        (EACCES) while a symlink the mount may not follow is among the objects."""
        from inotify_simple import flags

        with self._lock:
            if self._inotify.closed:  # no longer watched: nothing may be read through icechunk
                raise StoreError(f"{self._root}: the repository is closed", errno.EIO)
            events = self._inotify.read(timeout=0)
            self._lost = self._lost or any(event.mask & flags.Q_OVERFLOW for event in events)
            try:
                if self._lost:  # everything looked at again
                    self._walked, self._cut_short = 0, False
                    self._walk_objects()
                    self._lost = False
                for event in events:
                    directory = self._directories.get(event.wd)
                    if event.mask & flags.IGNORED:  # the directory is gone
                        self._directories.pop(event.wd, None)
                    elif directory is not None and (directory != self._source or event.name in OBJECTS):
                        self._look_at(os.path.join(directory, event.name), bool(event.mask & flags.ISDIR))
            except StoreError:
                self._lost = True
                raise
            self._refused = {path: why for path, why in self._refused.items() if os.path.islink(path)}
            self._refuse_found()

    def close(self) -> None:
        """The watch let go: a user's inotify instances are few (fs.inotify.max_user_instances)."""
        with self._lock:
            if not self._inotify.closed:
                self._inotify.close()

    def _look_at(self, path: str, directory: bool) -> None:
        """An entry made or moved into a watched directory: a directory walked, anything else
        looked at alone (a file is most of them: the chunks icechunk writes)."""
        if directory:
            self._walk([path])
        elif os.path.islink(path):
            self._look_at_symlink(path)

    def _refuse_found(self) -> None:
        if self._refused:
            path = min(self._refused)
            raise StoreError(self._refused[path], errno.EACCES)

    def _walk_objects(self) -> None:
        self._walk([os.path.join(self._source, name) for name in OBJECTS])

    def _walk(self, pending: list[str]) -> None:
        """Each path of `pending` and everything below it looked at: a symlink the mount may not
        follow kept in _refused, a directory watched, then listed."""
        while pending:
            path = pending.pop()
            if os.path.islink(path):
                self._look_at_symlink(path)
            elif self._watch(path) and not self._cut_short:
                entries = self._listing(path)
                self._walked += len(entries)
                if self._walked > MAX_OBJECTS:
                    self._past_the_bound()
                    continue
                for entry in entries:
                    if entry.is_symlink():
                        self._look_at_symlink(entry.path)
                    elif entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)

    def _watch(self, path: str, follow: bool = False) -> bool:
        """Watch directory `path` for entries made or moved into it; False for a file or nothing
        (or a symlink, unless `follow`)."""
        from inotify_simple import flags

        mask = flags.CREATE | flags.MOVED_TO | flags.ONLYDIR | (0 if follow else flags.DONT_FOLLOW)
        try:
            wd = self._inotify.add_watch(path, mask)
        except (FileNotFoundError, NotADirectoryError):  # no such object, or a file: nothing below it
            return False
        except OSError as e:  # ENOSPC: fs.inotify.max_user_watches
            raise StoreError(f"{self._root}: {path} cannot be watched for symlinks ({e.strerror}: "
                             f"fs.inotify.max_user_watches)", errno.EACCES) from None
        self._directories[wd] = path
        return True

    def _listing(self, path: str) -> list[os.DirEntry]:
        try:
            with os.scandir(path) as listing:
                return list(listing)
        except (FileNotFoundError, NotADirectoryError):  # gone since it was watched
            return []
        except OSError as e:  # PermissionError above all: what it holds cannot be looked at
            raise StoreError(f"{self._root}: {path} cannot be listed ({e.strerror}): the repository's objects are "
                             f"not all looked at for symlinks", errno.EACCES) from None

    def _past_the_bound(self) -> None:
        if not self._follow_symlinks:
            raise StoreError(f"{self._root}: more than {MAX_OBJECTS} objects: not all looked at for symlinks "
                             f"(-o symlinks=follow trusts the repository)", errno.EACCES)
        log.warning("%s: more than %d objects: the rest are not looked at for symlinks into /proc, /sys "
                    "or /dev (-o symlinks=follow trusts the repository)", self._root, MAX_OBJECTS)
        self._cut_short = True

    def _look_at_symlink(self, path: str) -> None:
        """A symlink among the objects: refused unless followed, and then unless it leads under
        /proc, /sys or /dev."""
        target = os.path.realpath(path)
        if not self._follow_symlinks:
            self._refused[path] = (f"{self._root}: {path} is a symlink (to {target}): a repository's objects are not "
                                   f"followed outside it (-o symlinks=follow trusts the repository)")
            return
        refused = never_followed_into(target)
        if refused:
            self._refused[path] = f"{self._root}: {path} leads to {target}: nothing under {refused} is followed"


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
