"""A tree of groups and arrays as the model; mkdir, rmdir, cp of an .npy, rm, mv and attribute
edits through a real mount, with remounts; zarr-python's view of the store (its own documents
and the consolidated copy) checked against the model."""

import errno
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import zarr
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from helpers import delete_array
from mounting import Remounts

NAMES = st.sampled_from(["a", "b", "c"])
GROUP, ARRAY = "group", "array"


def zarr_view(root, consolidated: bool) -> dict:
    """path -> (kind, attributes, data) as zarr-python reads the store."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_consolidated(str(root)) if consolidated else zarr.open_group(str(root), mode="r")
        found = {}
        for path, node in group.members(max_depth=None):
            if isinstance(node, zarr.Group):
                found[path] = (GROUP, dict(node.attrs), None)
            else:
                found[path] = (ARRAY, dict(node.attrs), node[...].tolist())
        return found


class Tree(Remounts, RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="zarrfs-shaping-"))
        self.root = self.tmp / "t.zarr"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zarr.open_group(str(self.root), mode="w")
            zarr.consolidate_metadata(str(self.root))
        self.model: dict[str, tuple] = {}  # path -> (kind, attributes, data as a list)
        self._mount()

    def groups(self):
        return [""] + sorted(p for p, v in self.model.items() if v[0] == GROUP)

    def children(self, parent):
        prefix = parent + "/" if parent else ""
        return {p[len(prefix):] for p in self.model if p.startswith(prefix) and "/" not in p[len(prefix):]}

    def fs(self, path, kind=GROUP):
        return self.mount.path / (path + (".bin" if kind == ARRAY else ""))

    def expect(self, code, action, *args):
        try:
            action(*args)
        except OSError as e:
            said = [line for line in self.mount.log().splitlines() if " holds " in line or "ERROR" in line][-5:]
            assert e.errno in (code if isinstance(code, tuple) else (code,)), (e, code, said)
            return False
        assert code == 0, f"expected errno {code}"
        return True

    @rule(data=st.data(), name=NAMES)
    def mkdir(self, data, name):
        parent = data.draw(st.sampled_from(self.groups()))
        path = f"{parent}/{name}" if parent else name
        code = errno.EEXIST if name in self.children(parent) else 0
        if self.expect(code, os.mkdir, self.fs(path)):
            self.model[path] = (GROUP, {}, None)

    @rule(data=st.data(), name=NAMES, values=st.lists(st.integers(-1000, 1000), min_size=1, max_size=6))
    def copy_npy(self, data, name, values):
        parent = data.draw(st.sampled_from(self.groups()))
        path = f"{parent}/{name}" if parent else name
        source = self.tmp / "in.npy"
        np.save(source, np.array(values, dtype="<i2"))
        existing = self.model.get(path)
        if existing is None:
            code = errno.EEXIST if name in self.children(parent) else 0
        elif existing[0] == GROUP:
            code = errno.EEXIST
        else:  # NAME.npy is the array's own view: a copy of the same shape replaces the data
            code = 0 if len(existing[2]) == len(values) else errno.EPERM
        if self.expect(code, shutil.copyfile, source, self.mount.path / (path + ".npy")):
            self.model[path] = (ARRAY, existing[1] if existing else {}, values)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data):
        path = data.draw(st.sampled_from(sorted(self.model)))
        kind = self.model[path][0]
        if kind == ARRAY:
            parent, _, name = path.rpartition("/")
            delete_array(self.mount.path / parent, name)  # rm NAME.*: the array goes with its last file
        else:
            code = errno.ENOTEMPTY if self.children(path) else 0
            if not self.expect(code, os.rmdir, self.fs(path)):
                return
        del self.model[path]

    @precondition(lambda self: self.model)
    @rule(data=st.data(), name=NAMES)
    def move(self, data, name):
        path = data.draw(st.sampled_from(sorted(self.model)))
        parent = data.draw(st.sampled_from(self.groups()))
        target = f"{parent}/{name}" if parent else name
        kind = self.model[path][0]
        if target == path or target.startswith(path + "/"):
            return  # into itself: the kernel refuses it before zarrfs sees it
        code = errno.EEXIST if name in self.children(parent) else 0
        if path.startswith(target + "/"):  # onto its own ancestor: the kernel answers first
            code = (errno.ENOTEMPTY, errno.EEXIST)
        if self.expect(code, os.rename, self.fs(path, kind), self.fs(target, kind)):
            for p in sorted(p for p in self.model if p == path or p.startswith(path + "/")):
                self.model[target + p[len(path):]] = self.model.pop(p)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), key=NAMES, value=st.integers(0, 9))
    def set_attribute(self, data, key, value):
        path = data.draw(st.sampled_from(sorted(self.model)))
        kind, attributes, values = self.model[path]
        os.setxattr(self.fs(path, kind), f"user.zarr.attr.{key}", str(value).encode())
        self.model[path] = (kind, {**attributes, key: value}, values)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), attributes=st.dictionaries(NAMES, st.integers(0, 9), max_size=2))
    def write_document(self, data, attributes):
        """Attributes replaced by writing the array's sidecar or the group's zarr.json."""
        path = data.draw(st.sampled_from(sorted(self.model)))
        kind, _, values = self.model[path]
        document = self.mount.path / (path + ".json" if kind == ARRAY else f"{path}/zarr.json")
        doc = json.loads(document.read_text())
        document.write_text(json.dumps(dict(doc, attributes=attributes)))
        self.model[path] = (kind, attributes, values)

    @precondition(lambda self: self.mounts < 3)
    @rule()
    def remount(self):
        self._unmount()
        self.check()
        self._mount()

    def check(self):
        expected = {p: v for p, v in self.model.items()}
        assert zarr_view(self.root, consolidated=False) == expected
        assert zarr_view(self.root, consolidated=True) == expected

    def teardown(self):
        try:
            try:
                if self.mount is not None:  # else a remount failed, and said so
                    listed = set(os.listdir(self.mount.path))
                    assert {n for n in self.children("") if self.model[n][0] == GROUP} <= listed
            finally:
                self._unmount()
            self.check()
            assert not [p for p in self.root.rglob(".zarrfs-tmp-*")]
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)  # its own directory, failed or not


Tree.TestCase.settings = settings(max_examples=15, stateful_step_count=20, deadline=None)
test_a_tree_shaped_through_the_mount_matches_its_model = Tree.TestCase
