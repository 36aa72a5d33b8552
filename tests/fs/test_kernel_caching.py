"""How long the kernel may keep what the file system shows, decided by the core from the store
(fs/kernel_caching.py) and only applied by the FUSE adapter's init_with_config."""

import pytest

from core import core_of
from helpers import make_store
from zarrfs.fs.kernel_caching import ENTRY_TIMEOUT, kernel_caching
from zarrfs.stores.contract import Capabilities


def test_a_local_store_keeps_pages_across_opens(tmp_path):
    with core_of(make_store(tmp_path / "s.zarr"), tmp_path) as c:
        caching = c.fs.kernel_caching()
    assert caching.keep_pages and caching.recheck_pages_after is None
    assert not caching.drop_pages_on_change  # the mount's own writes move the mtime: see kernel_caching.py
    assert caching.attr_timeout == caching.entry_timeout == ENTRY_TIMEOUT == 30.0
    assert caching.negative_timeout == 0  # a name an edit makes (c.npy makes c.bin) is there at once


@pytest.mark.parametrize("mode", ["rw", "ro"])
def test_metadata_ttl_shortens_how_long_a_local_stores_listings_and_attributes_are_trusted(tmp_path, mode):
    """-o metadata_ttl below 30 s has another program's changes to a local store show sooner:
    the stored values are listed again, held arrays looked at and attributes asked for again
    after it (test_mount_other_writers.py); one above 30 s leaves the 30 s."""
    store = make_store(tmp_path / "s.zarr")
    with core_of(store, tmp_path, mode, "metadata_ttl=2") as c:
        caching, lifetime = c.fs.kernel_caching(), c.fs.usage.lifetime
    assert caching.attr_timeout == caching.entry_timeout == lifetime == 2.0
    with core_of(store, tmp_path, mode, "metadata_ttl=600") as c:
        caching, lifetime = c.fs.kernel_caching(), c.fs.usage.lifetime
    assert caching.attr_timeout == caching.entry_timeout == lifetime == ENTRY_TIMEOUT


def test_a_read_only_mount_of_a_local_store_drops_pages_for_a_new_mtime(tmp_path):
    """No write of its own moves a read-only mount's mtimes: a new one is another program's
    change, whose bytes the kernel must read again (test_mount_other_writers.py)."""
    with core_of(make_store(tmp_path / "s.zarr"), tmp_path, "ro") as c:
        caching = c.fs.kernel_caching()
    assert caching.keep_pages and caching.drop_pages_on_change


def test_a_read_only_mount_of_a_remote_store_rechecks_pages_and_names_after_its_metadata_ttl():
    quick = kernel_caching(Capabilities(remote=True, metadata_ttl=5.0), read_only=True)
    assert not quick.keep_pages and quick.recheck_pages_after == 5.0 and quick.drop_pages_on_change
    assert quick.attr_timeout == quick.entry_timeout == 5.0  # what other machines write shows within the ttl
    slow = kernel_caching(Capabilities(remote=True, metadata_ttl=600.0), read_only=True)
    assert slow.recheck_pages_after == 600.0 and slow.attr_timeout == slow.entry_timeout == ENTRY_TIMEOUT


def test_a_writable_mount_of_a_remote_store_leaves_dropping_pages_to_the_file_system():
    """The mount's own writes move the mtime: neither auto_inval_data nor auto_cache, which drop
    the pages for it (racing the next write: kernel_caching.py); the file system drops them for
    another writer's change. Names and attributes still go after the metadata_ttl."""
    caching = kernel_caching(Capabilities(remote=True, metadata_ttl=5.0))
    assert caching.keep_pages and not caching.drop_pages_on_change and caching.recheck_pages_after is None
    assert caching.attr_timeout == caching.entry_timeout == 5.0


def test_a_remote_store_with_no_other_writer_keeps_pages_as_a_local_one():
    """metadata_ttl None says no other writer is expected (an Icechunk snapshot, a branch's own
    session): nothing to look at again, so the pages stay, as on a local store."""
    caching = kernel_caching(Capabilities(remote=True, metadata_ttl=None))
    assert caching.keep_pages and caching.recheck_pages_after is None and not caching.drop_pages_on_change
    assert caching.attr_timeout == caching.entry_timeout == ENTRY_TIMEOUT
