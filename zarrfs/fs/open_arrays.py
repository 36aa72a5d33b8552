"""The write-back methods of Operations (which gives _arrays, options, store, usage, unstored,
_stop and _wake_flusher): the flusher thread, a request's own flush, and at unmount the last
write-back, whose failures are saved as recovery data (recovery.py)."""

import logging
import os
import tempfile
import time

from zarrfs.engine import recovery
from zarrfs.errors import ZarrfsError

log = logging.getLogger(__name__)

SHUTDOWN_TRIES = 4  # write-back attempts at unmount, a second apart, before the data is saved aside


class WriteBackMethods:
    def _final_write_back(self) -> None:
        """Store every write, retrying a few times; what still cannot be stored is saved as
        recovery data (see recovery.py), and the daemon will exit non-zero."""
        for attempt in range(SHUTDOWN_TRIES):
            if attempt:
                time.sleep(1.0)
            self.flush_all()
            failed = [a for a in self._arrays.values() if a.raw.array.dirty]
            if not failed:
                return
        for opened in failed:
            self._save_unstored(opened)

    def _save_unstored(self, opened: "OpenArray") -> None:
        name = opened.node.path or "/"
        places = [self.options.recovery_dir, os.path.join(tempfile.gettempdir(), "zarrfs-recovery")]
        try:
            saved = recovery.save(places, self.store.root, opened.node.path, opened.node.meta.document,
                                  opened.raw.array.unstored())
        except OSError as e:
            log.critical("written data of %s could not be stored, and is lost: %s", name, e)
            self.unstored.append(name)
            return
        log.error("written data of %s could not be stored (%s); saved in %s: replay it with "
                  "`zarrfs-recover %s`", name, opened.error, saved, saved)
        self.unstored.append(name)

    def _flusher(self) -> None:
        """Write-back: dirty chunks reach the store within a few seconds, or as soon as
        EARLY_WRITE_BACK (operations.py) piles up, so that encoding and the disk overlap a long write, and the
        chunks a write-back frees are written into again instead of new memory."""
        last_full = time.monotonic()
        while not self._stop.is_set():
            early = self._wake_flusher.wait(self.options.flush_interval)
            self._wake_flusher.clear()
            whole_only = early and time.monotonic() - last_full < self.options.flush_interval
            self.flush_all(whole_only)
            if not whole_only:
                last_full = time.monotonic()

    def flush_all(self, whole_only: bool = False) -> None:
        for opened in list(self._arrays.values()):
            self._write_back(opened, whole_only)

    def _write_back(self, opened: "OpenArray", whole_only: bool) -> None:
        """One array's write-back; a failure is kept for the next fsync/close and logged once."""
        if opened.retired:  # deleted or moved through the mount (shaping.py)
            return
        name = opened.node.path or "/"
        try:
            opened.raw.flush(whole_only)
        except ZarrfsError as e:
            self.usage.forget(opened.node.path)
            again = opened.failing == str(e)  # the same failure every few seconds
            log.log(logging.DEBUG if again else logging.ERROR, "write-back of %s failed: %s", name, e)
            opened.error, opened.failing = e, str(e)
        except Exception as e:  # a bug: keep the data dirty and the flusher alive
            log.exception("write-back of %s failed", name)
            opened.error = ZarrfsError(f"write-back failed: {e!r}")
        else:
            self.usage.forget(opened.node.path)
            if opened.failing and not opened.raw.array.dirty:
                log.warning("write-back of %s succeeds again", name)
                opened.failing = ""

    def _flush(self, opened: "OpenArray") -> None:
        if opened.retired:
            return
        error, opened.error = opened.error, None
        if error is not None:
            raise error
        try:
            opened.raw.flush()
        finally:
            self.usage.forget(opened.node.path)
