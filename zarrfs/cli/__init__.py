"""The zarrfs and zarrfs-recover commands: options, logging, daemonizing, readiness."""

from zarrfs.cli.command import main

__all__ = ["main"]
