"""Files a person deleted from a node that stays: hidden from lookups and listings until the
node goes (deleted or moved, by the mount or by another program), a node is made at its path,
or the mount ends.

An array is shown as several files made from one node (NAME.bin, NAME.json, header views), and
a group's directory holds its documents and group files (zarr.json, zarr.h5). Deleting one of
them alone deletes no data: the file is hidden, and the array is deleted when the last of its
files is (edits/hierarchy_edits.py). A file manager that stats each file of a selection before
deleting it so finds every one, whatever its order. Kept in memory only: nothing is written.

Files are hidden by the node's path, so a node made later at that path would find them hidden:
the mount forgets them before it makes or moves a node there (edits/editor.py: a file of the
new node may be hidden the moment it shows) and hides them again if the store refuses the edit
(EEXIST: the node there stays as it was), and a listing
that finds the node gone forgets them (another program deleted it). A listing is a snapshot
taken while others may hide files: it forgets only what was hidden before it began, so a
node made and then deleted file by file during a slow listing keeps its files hidden.
"""

import threading


class HiddenFiles:
    def __init__(self):
        # (store path of the node, name in its directory) -> the version at which it was hidden
        self._hidden: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.version = 0  # changes with every change: a listing filtered before is stale

    def hidden(self, node_path: str, name: str) -> bool:
        return (node_path, name) in self._hidden

    def hide(self, node_path: str, name: str) -> None:
        with self._lock:
            self.version += 1
            self._hidden[(node_path, name)] = self.version

    def show(self, node_path: str, name: str) -> None:
        with self._lock:
            self._hidden.pop((node_path, name), None)
            self.version += 1

    def forget(self, node_path: str) -> list[tuple[str, str]]:
        """The node at `node_path` and every node below it are gone or moved, or a node is about
        to be made there: their files, if made again at that path, are shown. Answers what it
        forgot (restore() hides them again where the node could not be made)."""
        below = node_path + "/"
        return self._forget(lambda path, _: path == node_path or path.startswith(below))

    def restore(self, forgotten: list[tuple[str, str]]) -> None:
        """Hide again what forget() answered: the store refused the node made there."""
        for node_path, name in forgotten:
            self.hide(node_path, name)

    def keep_present(self, directory: str, present: set[str], listed_at: int) -> None:
        """A listing of the group at store path `directory`, begun at version `listed_at`, found
        the nodes at `present`: the files hidden before then of a child node that is gone
        (another program deleted it) and of every node below it are forgotten, so that a node
        made there later shows every file."""
        prefix = directory + "/" if directory else ""

        def gone(path: str, when: int) -> bool:
            if not path.startswith(prefix) or path == directory or when > listed_at:
                return False
            return prefix + path[len(prefix):].split("/", 1)[0] not in present  # the child it lies in
        self._forget(gone)

    def _forget(self, which) -> list[tuple[str, str]]:
        """Show again every file whose node path and version hidden satisfy which(path, when)."""
        with self._lock:
            keys = [key for key, when in self._hidden.items() if which(key[0], when)]
            for key in keys:
                del self._hidden[key]
            if keys:
                self.version += 1
            return keys
