"""The `-o` options as `zarrfs --help` lists them, each with its default (read from Options, so
the two cannot disagree)."""

from zarrfs.cli.daemon_log import default_log_file
from zarrfs.engine.write_bound import EARLY_WRITE_BACK
from zarrfs.fs.filesystem import REMOTE_FETCHERS
from zarrfs.fs.kernel_caching import ENTRY_TIMEOUT

# The per-user defaults as a rule, for the docs (docs/usage.md is the same for root and users)
GENERIC_DEFAULTS = {
    "recovery_dir": "/var/lib/zarrfs/recovery as root, else $XDG_STATE_HOME/zarrfs/recovery",
    "log_file": "syslog; without /dev/log /var/log/zarrfs/zarrfs.log as root, else $XDG_STATE_HOME/zarrfs/zarrfs.log",
}


def format_size(nbytes: int) -> str:
    for unit, shift in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def option_lines(defaults, views, generic: bool = False) -> list[tuple[str, str, str]]:
    """(syntax, default, what it does) for every option parse_options accepts; `generic`: the
    defaults that depend on the user said as a rule (the docs' table)."""
    lines = [
        ("ro", "off", "read-only: writes fail with EROFS, no file shows a write bit"),
        ("cache_size=SIZE", format_size(defaults.cache_bytes), "decoded chunks kept in memory (e.g. 512M, 2G)"),
        ("decode_ahead=SIZE", format_size(defaults.ahead_bytes),
         "of cache_size (at most a quarter): chunks decoded ahead of sequential readers on all cores; 0: off"),
        ("dirty_size=SIZE", format_size(defaults.dirty_limit),
         f"decoded bytes written to one array and not yet stored; write-back starts at {format_size(EARLY_WRITE_BACK)} "
         "or a quarter of it, whichever is less"),
        ("views=LIST", ",".join(defaults.views) or "none",
         (f"header views beside each NAME.bin, and zarr.h5/zarr.nc in each group (hdf5: needs h5py, the "
          f"hdf5 extra), from {','.join(views)}; or none")),
        ("previews", "off", "NAME.png beside arrays of 2 or more dimensions: the first plane, at most 512 px "
         "(needs Pillow: the previews extra)"),
        ("noxattr", "off", "no extended attributes (user.zarr.*, user.mime_type): a tool that lists every "
         "file's attributes (ls -l of coreutils 9.6 and later) then sends no request per file"),
        ("grow=all|marked|none", defaults.grow,
         "which arrays grow along dimension 0 when NAME.bin is appended to or truncated to whole records: "
         "marked is those NCZarr marks unlimited and those stored with dimension 0 empty (docs/writing.md)"),
        ("nozerocopy", "off", "uncompressed little-endian chunks (the bytes codec alone) are read through the "
         "daemon like any other, not answered from the stored files by libfuse itself"),
        ("header_cache_size=SIZE", format_size(defaults.header_cache_bytes), "header views and listing attributes kept"),
        ("recovery_dir=DIR", defaults.recovery_dir, "where written data that cannot be stored at shutdown is saved"),
        ("symlinks=follow", "contain",
         "a trusted store's symlinks that lead out of it are read through (never to a FIFO, socket or device, "
         "nor under /proc, /sys, /dev); a write replaces a linked chunk, never its target. contain: refused (EACCES)"),
        ("log_file=PATH", f"syslog; without /dev/log {default_log_file()}",
         "where a daemonized zarrfs logs, said at mount (with -f: besides stderr)"),
        ("endpoint=URL", "AWS_ENDPOINT_URL, else the cloud's",
         "object stores: an S3-compatible server (e.g. http://127.0.0.1:9000), a GCS or Azure emulator"),
        ("region=NAME", "AWS_REGION, else us-east-1", "object stores: the S3 region"),
        ("anon", "off", "object stores: unsigned requests, for public buckets"),
        ("credentials_file=PATH", "the environment's",
         "object stores: an AWS-style credentials file (or a GCS service account, or an [azure] section); mode 600"),
        ("ca_file=PATH", "the system's CAs", "object stores: PEM certificates of CAs to trust as well, for https"),
        ("prefetch_size=SIZE", format_size(defaults.remote.prefetch_size),
         f"object stores: chunks fetched and decoded ahead of sequential readers, {REMOTE_FETCHERS} at once (of cache_size, "
         "at most a quarter); 0: off"),
        ("timeout=SECONDS", f"{defaults.remote.timeout:g}", "object stores: the longest a request may take, retries "
         "included; a local store: the longest a write waits for another zarrfs process's lock of a document"),
        ("metadata_ttl=SECONDS", f"{defaults.remote.metadata_ttl:g}",
         "object stores: how long listings and metadata documents are trusted before they are asked for again; "
         "a local store: how long an array's stored mtimes and sizes and the kernel's attributes are trusted, "
         f"at most {ENTRY_TIMEOUT:g} (a local store's default), so another program's changes show within about "
         "twice this; "
         "Icechunk: how long a branch's directory shows the head it last looked up"),
        ("icechunk", "by the repository's layout", "the SOURCE is an Icechunk repository (needed for s3://, gs://, "
         "az://, http(s)://; Python >= 3.12): docs/icechunk.md"),
        ("branch=NAME, tag=NAME, snapshot=ID", "branch=main", "Icechunk: the version the mount shows; every "
         "version is also a directory @branch.NAME, @tag.NAME, @SNAPSHOTID"),
        ("commit_on_unmount=MESSAGE", "off", "Icechunk, a branch mounted writable: what was written and not "
         "committed is committed at unmount with this message"),
        ("nonempty", "off", "mount over a directory that holds files (they are hidden until unmount); without it "
         "such a mount point is refused"),
        ("uid=N, gid=N", "the stored documents' owner (object stores: the mounting user)",
         "the numeric owner and group every file shows; the kernel then checks the modes (default_permissions)"),
        ("umask=OCTAL", f"{defaults.ownership.umask:03o}",
         "bits taken from every mode shown: 077 keeps other users out, 002 lets the group write; the kernel "
         "then checks the modes (default_permissions)"),
        ("debug", "off", "as -d: one log line per request, chunk decode and store read; implies -f"),
        ("allow_other", "off", "other users may use the mount, as the modes shown allow: the kernel checks them "
         "(default_permissions is added), since the daemon writes with the owner's credentials"),
        ("allow_root, default_permissions, auto_unmount, fsname=NAME, subtype=NAME", "libfuse's",
         "passed to libfuse"),
        ("rw, dev, suid, exec, auto, noauto, user, _netdev, nofail, defaults, x-*, ...", "",
         "added by mount(8), fstab or systemd: accepted and ignored"),
    ]
    if generic:
        lines = [(syntax, GENERIC_DEFAULTS.get(syntax.partition("=")[0], default), text)
                 for syntax, default, text in lines]
    return lines


def options_table(defaults, views) -> str:
    """The options as the Markdown table of docs/usage.md (scripts/options_table.py writes it there)."""
    rows = ["| option | default | what it does |", "|---|---|---|"]
    for syntax, default, text in option_lines(defaults, views, generic=True):
        rows.append(f"| `{syntax}` | {default or '-'} | {text.replace('|', '/')} |")
    return "\n".join(rows)


def epilog(defaults, views) -> str:
    lines = ["options (-o OPTION[,OPTION...]; default in brackets):"]
    for syntax, default, text in option_lines(defaults, views):
        lines.append(f"  {syntax}" + (f"  [{default}]" if default else ""))
        lines.append(f"      {text}")
    lines += ["", "example: zarrfs /data/experiment.zarr /mnt/experiment -o ro,cache_size=2G",
              "unmount: fusermount3 -u MOUNTPOINT",
              "commit (an Icechunk branch mounted writable): zarrfs commit MOUNTPOINT -m MESSAGE"]
    return "\n".join(lines)
