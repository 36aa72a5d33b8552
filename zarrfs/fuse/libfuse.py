"""mfusepy, bound to libfuse 3: given no name, mfusepy loads libfuse 2 wherever both are
installed (Debian's `fuse` package brings it), and zarrfs needs libfuse 3's readdir and lseek.
Every module imports mfusepy from here, so whichever comes first sets the name."""

import os

os.environ["FUSE_LIBRARY_NAME"] = "fuse3"
import mfusepy  # noqa: E402

__all__ = ["mfusepy"]
