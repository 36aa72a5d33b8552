"""SOURCE -> a store: a local directory, or an object-store URL (s3://, gs://, az://, http(s)://).

Credentials come from each cloud's standard environment variables, from the AWS shared
credentials file (~/.aws/credentials, AWS_PROFILE), or from `-o credentials_file=PATH`, which
must not be readable by group or others. They are handed to obstore and never logged.
"""

import configparser
import errno
import os
import stat
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

from zarrfs.errors import StoreError
from zarrfs.stores.local import LocalStore

SCHEMES = {"s3", "gs", "az", "http", "https"}


@dataclass
class RemoteOptions:
    endpoint: str | None = None  # an S3-compatible server
    region: str | None = None
    anon: bool = False  # unsigned requests
    timeout: float = 30.0  # seconds for one request, its retries included
    metadata_ttl: float = 60.0  # seconds listings and metadata documents are trusted
    credentials_file: str | None = None
    prefetch_size: int = 64 << 20  # chunks fetched and decoded ahead of sequential readers


def is_remote(source: str) -> bool:
    return urlsplit(source).scheme in SCHEMES


def public_url(source: str) -> str:
    """The URL without any user:password part, for messages and the mount table."""
    parts = urlsplit(source)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def open_store(source: str, read_only: bool, remote: RemoteOptions, follow_symlinks: bool = False):
    if not is_remote(source):
        return LocalStore(source, read_only=read_only, follow_symlinks=follow_symlinks)
    from zarrfs.stores.object_store import ObjectStore  # obstore is needed only for remote sources

    scheme = urlsplit(source).scheme
    if urlsplit(source).password or urlsplit(source).username:
        raise StoreError(f"{public_url(source)}: credentials in the URL are refused (they would show in the process "
                         f"list): use the environment or -o credentials_file", errno.EINVAL)
    if scheme in ("http", "https") and not read_only:
        raise StoreError(f"{public_url(source)}: http(s) sources are read-only: add -o ro", errno.EROFS)
    store = _obstore(source, remote)
    return ObjectStore(store, public_url(source), read_only=read_only, metadata_ttl=remote.metadata_ttl,
                       can_list=scheme not in ("http", "https"))


def _obstore(source: str, remote: RemoteOptions):
    from obstore.store import from_url

    parts = urlsplit(source)
    url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    # One attempt may take half the timeout, and no retry starts after the other half: a
    # request, its retries included, is over within `timeout`.
    half = timedelta(seconds=remote.timeout / 2)
    client = {"timeout": half, "connect_timeout": min(half, timedelta(seconds=5)), "allow_http": True}
    retry = {"max_retries": 3, "retry_timeout": half}
    config = _config(parts.scheme, remote)
    try:
        return from_url(url, config=config or None, client_options=client, retry_config=retry)
    except Exception as e:
        raise StoreError(f"{public_url(source)}: {str(e).splitlines()[0][:200]}", errno.EINVAL) from None


def _config(scheme: str, remote: RemoteOptions) -> dict:
    config: dict = {}
    if scheme == "s3":
        if remote.endpoint:
            config["endpoint"] = remote.endpoint
        config["region"] = remote.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") \
            or "us-east-1"
        if remote.anon:
            config["skip_signature"] = True
        else:
            config.update(_aws_credentials(remote.credentials_file))
        config["conditional_put"] = "etag"
    elif scheme == "gs":
        if remote.anon:
            config["skip_signature"] = True
        elif remote.credentials_file:
            config["service_account_path"] = _private_file(remote.credentials_file)
    elif scheme == "az":
        if remote.anon:
            config["skip_signature"] = True
        elif remote.credentials_file:
            config.update(_ini_section(remote.credentials_file, "azure", {"account_name", "account_key", "sas_key"}))
    return config


def _aws_credentials(path: str | None) -> dict:
    """Keys from `path` (or the shared credentials file when the environment has none)."""
    if path is None:
        if os.environ.get("AWS_ACCESS_KEY_ID"):
            return {}  # obstore reads the environment itself
        path = os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.expanduser("~/.aws/credentials")
        if not os.path.exists(path):
            return {}
        private = False  # the AWS tools' own file: its permissions are the AWS tools' business
    else:
        private = True
    profile = os.environ.get("AWS_PROFILE", "default")
    names = {"aws_access_key_id": "access_key_id", "aws_secret_access_key": "secret_access_key",
             "aws_session_token": "session_token"}
    section = _ini_section(path, profile, set(names), private)
    return {names[k]: v for k, v in section.items()}


def _ini_section(path: str, section: str, wanted: set, private: bool = True) -> dict:
    parser = configparser.ConfigParser()
    try:
        with open(_private_file(path) if private else path) as f:
            parser.read_file(f)
    except (OSError, configparser.Error) as e:
        raise StoreError(f"{path}: cannot read credentials ({e})", errno.EACCES) from None
    if section not in parser:
        raise StoreError(f"{path}: no [{section}] section", errno.EINVAL)
    return {k: v for k, v in parser[section].items() if k in wanted}


def _private_file(path: str) -> str:
    """`path`, refused when group or others may read it: credentials stay private."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise StoreError(f"{path}: {e.strerror}", e.errno) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise StoreError(f"{path}: credentials file must not be readable by group or others (chmod 600)", errno.EACCES)
    return path
