"""Where an Icechunk repository lives, and which of its virtual chunk containers are read with
what credentials, as icechunk-python's Storage and credentials, made from the configuration
zarrfs's own object stores take for the same URL (source_url.py: the endpoint, -o anon, a
credentials file, the environment). A repository on s3://, gs:// and az:// is read and written;
one on http(s):// read (icechunk's HTTP storage is read-only).

A virtual chunk container on S3 is read with the mount's own S3 credentials, and only when its
endpoint is the mount's: the repository names the container's endpoint, and the mount's
credentials never go to a server the repository chose (docs/icechunk.md). No secret is put in a
message; icechunk's own errors are one line with the URLs' queries left out (async_loop.py).
"""

import errno
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from zarrfs.errors import StoreError

if TYPE_CHECKING:  # icechunk (Python >= 3.12) is imported for a repository only
    from icechunk import Storage


@dataclass(frozen=True)
class ObjectStoreAccess:
    """How the mount reaches the object stores of one URL scheme: obstore's configuration that
    zarrfs's own store of such a URL takes (endpoint, region, keys, unsigned), and whether plain
    http:// was chosen (an http:// endpoint or source)."""

    config: Mapping[str, Any] = field(default_factory=dict)
    plain_http: bool = False


# The mount's access for a scheme ("s3", "gs", "az", "http", "https"), made when first asked: a
# local repository with no remote container never reads the clouds' credentials.
AccessOf = Callable[[str], ObjectStoreAccess]


def repository_storage(icechunk: ModuleType, source: str, root: str, access: AccessOf) -> "Storage":
    """icechunk's Storage of the repository at `source` (a directory or an object store's URL)."""
    scheme = urlsplit(source).scheme
    if not scheme:
        local: Storage = icechunk.local_filesystem_storage(os.path.abspath(source))
        return local
    maker = STORAGES.get(scheme)
    if maker is None:
        raise StoreError(f"{root}: Icechunk repositories are mounted from a directory, s3://, gs://, az:// or "
                         f"http(s)://", errno.ENOTSUP)
    made: Storage = maker(icechunk, source, root, access(scheme))
    return made


def _s3(icechunk: ModuleType, source: str, root: str, access: ObjectStoreAccess) -> "Storage":
    parts, config = urlsplit(source), access.config
    endpoint = config.get("endpoint")
    storage = icechunk.s3_storage(bucket=parts.netloc, prefix=_prefix(source), endpoint_url=endpoint,
                                  region=config.get("region"), allow_http=access.plain_http,
                                  force_path_style=bool(endpoint), **_s3_credentials(config))
    return cast("Storage", storage)


def _s3_credentials(config: Mapping[str, Any]) -> dict[str, Any]:
    """s3_storage's (and s3_credentials') arguments for the mount's S3 credentials."""
    if config.get("skip_signature"):
        return {"anonymous": True}
    keys = {name: config[name] for name in ("access_key_id", "secret_access_key", "session_token") if name in config}
    return keys or {"from_env": True}


def _gcs(icechunk: ModuleType, source: str, root: str, access: ObjectStoreAccess) -> "Storage":
    config = access.config
    if config.get("skip_signature"):
        credentials: dict[str, Any] = {"anonymous": True}
    elif config.get("service_account"):
        credentials = {"service_account_file": config["service_account"]}
    else:
        credentials = {"from_env": True}
    storage = icechunk.gcs_storage(bucket=urlsplit(source).netloc, prefix=_prefix(source),
                                   config=_client_config(access, "base_url"), **credentials)
    return cast("Storage", storage)


def _azure(icechunk: ModuleType, source: str, root: str, access: ObjectStoreAccess) -> "Storage":
    config = access.config
    if config.get("skip_signature"):
        credentials: dict[str, Any] = {"anonymous": True}
    elif config.get("account_key") or config.get("sas_key"):
        credentials = {"access_key": config.get("account_key"), "sas_token": config.get("sas_key")}
    else:
        credentials = {"from_env": True}
    storage = icechunk.azure_storage(account=_azure_account(config, root), container=urlsplit(source).netloc,
                                     prefix=_prefix(source) or "", config=_client_config(access, "endpoint"),
                                     **credentials)
    return cast("Storage", storage)


def _client_config(access: ObjectStoreAccess, endpoint: str) -> dict[str, str] | None:
    """icechunk's client settings for GCS and Azure: the endpoint zarrfs's store takes under the
    same name (an emulator's), and plain HTTP where the user chose it."""
    options = {endpoint: access.config[endpoint]} if access.config.get(endpoint) else {}
    if access.plain_http:
        options["allow_http"] = "true"
    return options or None


def _azure_account(config: Mapping[str, Any], root: str) -> str:
    """The storage account: the credentials file's, the environment's, or a path-style
    endpoint's first segment (Azurite's http://HOST:PORT/ACCOUNT), as obstore finds it."""
    account = config.get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
    endpoint_path = urlsplit(str(config.get("endpoint") or "")).path.strip("/")
    account = account or endpoint_path.split("/")[0]
    if not account:
        raise StoreError(f"{root}: no storage account named (AZURE_STORAGE_ACCOUNT_NAME, account_name in the "
                         f"credentials file's [azure] section, or a path-style -o endpoint=URL/ACCOUNT)", errno.EINVAL)
    return str(account)


def _http(icechunk: ModuleType, source: str, root: str, access: ObjectStoreAccess) -> "Storage":
    options = {"allow_http": "true"} if access.plain_http else None
    made: Storage = icechunk.http_storage(source.rstrip("/"), options)
    return made


def _prefix(source: str) -> str | None:
    return urlsplit(source).path.strip("/") or None


STORAGES: dict[str, Callable[[ModuleType, str, str, ObjectStoreAccess], "Storage"]] = {
    "s3": _s3, "gs": _gcs, "az": _azure, "http": _http, "https": _http}


def s3_container_credentials(icechunk: ModuleType, container: Any, access: AccessOf) -> tuple[Any, str]:
    """(the credentials icechunk reads an s3:// virtual chunk container with, None for none; why
    not, for the log). The mount's own S3 credentials, for a container whose endpoint is the
    mount's: the repository chose the container's endpoint, and the mount's keys are not sent
    where a repository says."""
    store = container.store
    if not isinstance(store, (icechunk.ObjectStoreConfig.S3, icechunk.ObjectStoreConfig.S3Compatible)):
        return None, "its store is not an S3 store"
    try:
        mine = access("s3")
    except StoreError as e:  # the mount's S3 configuration cannot be made (a credentials file without [default])
        return None, f"the mount's S3 credentials: {e}"
    theirs, ours = _endpoint(store[0].endpoint_url), _endpoint(mine.config.get("endpoint"))
    if theirs != ours:
        return None, (f"its endpoint {theirs or '(AWS)'} is not the mount's {ours or '(AWS)'}: the mount's "
                      f"credentials go to the mount's endpoint only")
    return icechunk.s3_credentials(**_s3_credentials(mine.config)), ""


def _endpoint(url: object) -> str:
    return str(url or "").rstrip("/").lower()
