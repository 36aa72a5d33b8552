"""The core an Icechunk mount hands the adapter (fs/versions.py) stands in for FileSystem: it
answers every call the adapter makes of a FileSystem (a method FileSystem gained and it lacked
crashed libfuse's init, or made every open EINVAL, on Icechunk mounts only)."""

import ast
from pathlib import Path

from zarrfs.fs.filesystem import FileSystem
from zarrfs.fs.versions import VersionedFileSystem

ADAPTER = Path(__file__).parents[2] / "zarrfs" / "fuse" / "operations.py"


def calls_of_the_core() -> set[str]:
    """Names the adapter reads of `self.core`."""
    tree = ast.parse(ADAPTER.read_text())
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "core" and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"}


def test_the_versioned_core_answers_every_call_the_adapter_makes_of_a_filesystem():
    called = calls_of_the_core()
    assert {"read_into", "getattr", "kernel_caching", "uncached"} <= called  # the walk finds them
    missing = {name for name in called if hasattr(FileSystem, name) and not hasattr(VersionedFileSystem, name)}
    assert not missing, sorted(missing)
