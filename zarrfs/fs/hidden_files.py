"""Files a person deleted from a node that stays: hidden from lookups and listings until the
node goes (deleted, moved) or the mount ends.

An array is shown as several files made from one node (NAME.bin, NAME.json, header views), and
a group's directory holds its documents and group files (zarr.json, zarr.h5). Deleting one of
them alone deletes no data: the file is hidden, and the array is deleted when the last of its
files is (edits/hierarchy_edits.py). A file manager that stats each file of a selection before
deleting it so finds every one, whatever its order. Kept in memory only: nothing is written.
"""

import threading


class HiddenFiles:
    def __init__(self):
        self._hidden: set[tuple[str, str]] = set()  # (store path of the node, name in its directory)
        self._lock = threading.Lock()
        self.version = 0  # changes with every change: a listing filtered before is stale

    def hidden(self, node_path: str, name: str) -> bool:
        return (node_path, name) in self._hidden

    def hide(self, node_path: str, name: str) -> None:
        with self._lock:
            self._hidden.add((node_path, name))
            self.version += 1

    def show(self, node_path: str, name: str) -> None:
        with self._lock:
            self._hidden.discard((node_path, name))
            self.version += 1

    def forget(self, node_path: str) -> None:
        """The node at `node_path` and every node below it are gone or moved: their files, if
        made again at that path, are shown."""
        below = node_path + "/"
        with self._lock:
            gone = {key for key in self._hidden if key[0] == node_path or key[0].startswith(below)}
            if gone:
                self._hidden -= gone
                self.version += 1
