"""Whether this user may mount with these options, said before libfuse tries.

libfuse says the same things in two lines of its own words ending in `libfuse error 4`:
fusermount3 refuses allow_other and allow_root to a user other than root unless /etc/fuse.conf
has a line `user_allow_other`, and nothing mounts for a user who may not open /dev/fuse.
"""

import os

FUSE_CONF = "/etc/fuse.conf"  # where fusermount3 reads user_allow_other
FUSE_DEVICE = "/dev/fuse"
OPTIONS_FOR_OTHERS = ("allow_other", "allow_root")  # both need user_allow_other (fusermount3)


def refusal(fuse_options: dict) -> str | None:
    """One line saying why this user cannot mount with `fuse_options` and what to do, or None."""
    if os.geteuid() == 0:
        return None
    for option in OPTIONS_FOR_OTHERS:
        if option in fuse_options and not users_may_allow_other():
            return (f"-o {option} needs a line user_allow_other in {FUSE_CONF} for a user other than root: "
                    f"ask an administrator to add it, or mount without {option}")
    if os.path.exists(FUSE_DEVICE) and not os.access(FUSE_DEVICE, os.R_OK | os.W_OK):
        mode = os.stat(FUSE_DEVICE).st_mode & 0o777
        return (f"{FUSE_DEVICE}: this user may not open it (mode {mode:03o}): ask an administrator to make it "
                f"readable and writable by all (chmod 666 {FUSE_DEVICE}, as distributions ship it), or mount as root")
    return None


def users_may_allow_other() -> bool:
    """fusermount3's own reading: a line that is `user_allow_other` alone, spaces around it aside.
    A file this user cannot read is left to fusermount3, which can."""
    try:
        with open(FUSE_CONF, encoding="utf-8", errors="replace") as f:
            return any(line.strip() == "user_allow_other" for line in f)
    except FileNotFoundError:
        return False
    except OSError:
        return True
