"""SOURCE -> a store: a local directory, or an object-store URL (s3://, gs://, az://, http(s)://).

Credentials come from each cloud's standard environment variables, from the AWS shared
credentials file (~/.aws/credentials, AWS_PROFILE), or from `-o credentials_file=PATH`, which
must not be readable by group or others. They are handed to obstore and never logged.
"""

import configparser
import errno
import functools
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, TypeAlias, TypeVar
from urllib.parse import urlsplit, urlunsplit

from zarrfs.errors import StoreError
from zarrfs.stores.contract import Store
from zarrfs.stores.icechunk_repository import IcechunkChoice, IcechunkRepository, is_repository, open_repository
from zarrfs.stores.icechunk_storage import AccessOf, ObjectStoreAccess
from zarrfs.stores.icechunk_store import IcechunkStore
from zarrfs.stores.local import LocalStore

if TYPE_CHECKING:  # obstore's typed dicts exist in its stubs only; obstore is imported for remote sources only
    from obstore.store import AzureConfig, ClientConfig, GCSConfig, ObjectStore, RetryConfig, S3Config


# obstore's configuration of one kind of store (http(s) has none)
Config: TypeAlias = "S3Config | GCSConfig | AzureConfig"
CloudConfig = TypeVar("CloudConfig", "GCSConfig", "AzureConfig")  # _cloud_config's, checked for each

SCHEMES = {"s3", "gs", "az", "http", "https"}


@dataclass
class RemoteOptions:
    endpoint: str | None = None  # an S3-compatible server
    region: str | None = None
    anon: bool = False  # unsigned requests
    timeout: float = 30.0  # seconds for one request, its retries included
    metadata_ttl: float = 60.0  # seconds listings and metadata documents are trusted
    credentials_file: str | None = None
    ca_file: str | None = None  # PEM certificates of CAs to trust besides the system's, for https://
    prefetch_size: int = 64 << 20  # chunks fetched and decoded ahead of sequential readers


def is_remote(source: str) -> bool:
    return urlsplit(source).scheme in SCHEMES


def public_url(source: str) -> str:
    """The URL without any user:password part, for messages and the mount table."""
    parts = urlsplit(source)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True)
class Source:
    """What a SOURCE opens to: the store the mount shows, and the repository it is a version of
    (an Icechunk repository, whose other versions the mount shows too), or None."""

    store: Store
    repository: IcechunkRepository | None = None
    commits: IcechunkStore | None = None  # the store again, where it is a branch's writable session


def open_source(source: str, read_only: bool, remote: RemoteOptions, follow_symlinks: bool = False,
                icechunk: IcechunkChoice | None = None, recovery_dir: str | None = None) -> Source:
    """The store of SOURCE; for an Icechunk repository (its layout, or -o icechunk), the version
    chosen (the head of branch main by default) and the repository; a branch's writes not
    committed are kept in `recovery_dir`."""
    icechunk = icechunk or IcechunkChoice()
    if not icechunk.chosen() and (is_remote(source) or not is_repository(source)):
        return Source(open_store(source, read_only, remote, follow_symlinks))
    root = public_url(source) if is_remote(source) else os.path.abspath(source)
    if not read_only and (icechunk.tag or icechunk.snapshot):
        raise StoreError(f"{root}: {icechunk.name()} is read-only (a tag or a snapshot): add -o ro, or mount a branch "
                         f"to write", errno.EROFS)
    if is_remote(source):
        _check_remote(source, read_only, remote)
    if urlsplit(source).scheme == "gs" and remote.anon and not read_only:
        raise StoreError(f"{root}: icechunk's GCS client asks the cloud's metadata server for a token before it "
                         f"writes, even with -o anon: add -o ro", errno.EROFS)
    repository = open_repository(source, root, remote.timeout, _access_of(remote), follow_symlinks)
    try:
        return _version_source(repository, icechunk, read_only, recovery_dir)
    except BaseException:
        repository.close()  # its watch let go: a process may go on (the Python API, tests)
        raise


def _version_source(repository: IcechunkRepository, icechunk: IcechunkChoice, read_only: bool,
                    recovery_dir: str | None) -> Source:
    version = repository.version(icechunk.name())
    if version is None:
        raise StoreError(f"{repository.root}: no version {icechunk.name()} in this Icechunk repository",
                         errno.ENOENT)
    if read_only:
        return Source(repository.store(version), repository)
    branch = repository.branch_store(version, recovery_dir)
    return Source(branch, repository, branch)


def open_store(source: str, read_only: bool, remote: RemoteOptions,
               follow_symlinks: bool = False) -> Store:
    if not is_remote(source):
        return LocalStore(source, read_only=read_only, follow_symlinks=follow_symlinks, lock_deadline=remote.timeout)
    from zarrfs.stores.object_store import ObjectStore  # obstore is needed only for remote sources

    scheme = urlsplit(source).scheme
    _check_remote(source, read_only, remote)
    config, credentials = _config(scheme, remote)
    store = _obstore(source, remote, config, credentials)
    object_store = ObjectStore(store, public_url(source), read_only=read_only, metadata_ttl=remote.metadata_ttl,
                               can_list=scheme not in ("http", "https"), credentials=credentials,
                               timeout=remote.timeout)
    try:
        object_store.check_root()
    except StoreError as e:  # at start-up, the line names the source
        said = str(e) if str(e).startswith(object_store.root) else f"{object_store.root}: {e}"
        if scheme == "az" and e.errno not in (errno.ENOENT, errno.EACCES) and _names_no_account(remote.endpoint):
            said = f"{object_store.root}: {_add_the_account(remote, config, str(e))}"
        raise StoreError(said, e.errno) from None
    return object_store


def _check_remote(source: str, read_only: bool, remote: RemoteOptions) -> None:
    """What every remote source is held to, a Zarr hierarchy's or an Icechunk repository's."""
    if urlsplit(source).password or urlsplit(source).username:
        raise StoreError(f"{public_url(source)}: credentials in the URL are refused (they would show in the process "
                         f"list): use the environment or -o credentials_file", errno.EINVAL)
    if urlsplit(source).scheme in ("http", "https") and not read_only:
        raise StoreError(f"{public_url(source)}: http(s) sources are read-only: add -o ro", errno.EROFS)
    if remote.anon and remote.credentials_file:
        raise StoreError("-o anon (unsigned requests) and -o credentials_file contradict each other: choose one",
                         errno.EINVAL)


def _access_of(remote: RemoteOptions) -> AccessOf:
    """_access for the mount's repository and each of its virtual chunk containers, each scheme's
    made once: a credentials file is read once for the mount, however many containers name it."""
    return functools.cache(lambda scheme: _access(scheme, remote))


def _access(scheme: str, remote: RemoteOptions) -> ObjectStoreAccess:
    """How an Icechunk repository (or its virtual chunks' container) on `scheme` is reached: as
    zarrfs's own store of such a URL would be (icechunk_storage.py)."""
    config = _config(scheme, remote)[0] or {}
    return ObjectStoreAccess(config, plain_http_chosen(scheme, config))


def _names_no_account(endpoint: str | None) -> bool:
    """An endpoint with no path: right for an account's own host (ACCOUNT.blob.core.windows.net),
    wrong for Azurite and other path-style servers, which take the account as the first segment."""
    return endpoint is not None and endpoint != "" and urlsplit(endpoint).path.strip("/") == ""


def _add_the_account(remote: RemoteOptions, config: "Config | None", said: str) -> str:
    """The start-up failure of an az:// mount whose endpoint names no account, said as that."""
    from zarrfs.stores.remote_errors import server_code  # obstore's errors: imported for remote sources only

    code, _ = server_code(said)
    account = (config or {}).get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME") or "ACCOUNT"
    endpoint = (remote.endpoint or "").rstrip("/")  # called for an endpoint that names no account
    return (f"the endpoint {endpoint} names no storage account (the server answered {code or 'an error'}): a "
            f"path-style server such as Azurite takes it as the first path segment: -o endpoint={endpoint}/{account}")


def _obstore(source: str, remote: RemoteOptions, config: "Config | None", credentials: str | None) -> "ObjectStore":
    from obstore.store import from_url

    from zarrfs.stores.remote_errors import configuration_error

    parts = urlsplit(source)
    url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    # One attempt may take half the timeout, and no retry starts after the other half: a
    # request, its retries included, is over within `timeout`.
    half = timedelta(seconds=remote.timeout / 2)
    client: ClientConfig = {"timeout": half, "connect_timeout": min(half, timedelta(seconds=5)),
              "allow_http": plain_http_chosen(parts.scheme, config)}
    if remote.ca_file:
        client["root_certificate"] = _ca_certificates(remote.ca_file)
    retry: RetryConfig = {"max_retries": 3, "retry_timeout": half}
    try:
        return from_url(url, config=config or None, client_options=client, retry_config=retry)
    except Exception as e:
        said = QUOTED_VALUES.sub("(a value, not shown)", str(e).splitlines()[0])
        meant = configuration_error(said, parts.scheme, credentials)
        raise StoreError(f"{public_url(source)}: {meant or said[:200]}", errno.EINVAL) from None


# What serde quotes from a credentials document it cannot decode (a GCS service account: `invalid
# type: string "...", expected a boolean`): the values, which may be secrets; a field's name stays.
QUOTED_VALUES = re.compile(r'"[^"]*"|(?<!field )`[^`]*`')


# Variables the clients read an endpoint from themselves (the AWS ones are read into the config).
ENDPOINT_ENVIRONMENT = {"az": ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT"), "gs": ("GOOGLE_BASE_URL",)}


def plain_http_chosen(scheme: str, config: "Config | None") -> bool:
    """Whether the user chose plain HTTP: an http:// source or endpoint (Azurite through
    AZURE_STORAGE_USE_EMULATOR too). Otherwise the client speaks HTTPS only, and obstore, which
    follows redirects by itself, refuses one to http:// instead of sending the request (and
    its credentials) in clear."""
    config = config or {}
    endpoints = [config.get("endpoint"), config.get("base_url"),
                 *(os.environ.get(name) for name in ENDPOINT_ENVIRONMENT.get(scheme, ()))]
    emulator = scheme == "az" and os.environ.get("AZURE_STORAGE_USE_EMULATOR", "").lower() in ("1", "true", "yes")
    return scheme == "http" or emulator or any(isinstance(e, str) and e.lower().startswith("http://") for e in endpoints)


def _ca_certificates(path: str) -> str:
    """The PEM text of `path`, refused unless it holds at least one certificate: a wrong file is
    a clear line now, not a TLS failure later."""
    try:
        with open(path) as f:
            text = f.read(1 << 20)
    except (OSError, UnicodeDecodeError) as e:
        raise StoreError(f"ca_file {path}: {getattr(e, 'strerror', None) or e}", errno.EINVAL) from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise StoreError(f"ca_file {path}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)", errno.EINVAL)
    return text


def _config(scheme: str, remote: RemoteOptions) -> tuple["Config | None", str | None]:
    """obstore's configuration for `scheme` (None: none, http(s)), and where the credentials come
    from (for messages)."""
    if scheme not in CONFIGS:
        return None, None
    return CONFIGS[scheme](remote)


def _s3_config(remote: RemoteOptions) -> tuple["S3Config", str | None]:
    config: S3Config = {"conditional_put": "etag"}
    credentials: str | None
    settings: dict[str, str]
    if remote.anon:
        config["skip_signature"] = True
        credentials, settings = "nowhere: -o anon sends unsigned requests", {}
    else:
        keys, credentials, settings = _aws_credentials(remote.credentials_file)
        config.update(keys)
    endpoint = remote.endpoint or _environment_endpoint() or settings.get("endpoint_url")
    if endpoint:
        config["endpoint"] = check_endpoint(endpoint)
    config["region"] = remote.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") \
        or settings.get("region") or "us-east-1"
    return config, credentials


def _environment_endpoint() -> str | None:
    """The AWS tools' variables for an endpoint (the S3 one first), as obstore itself reads them."""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"):
        if os.environ.get(name):
            return os.environ[name]
    return None


def check_endpoint(endpoint: str) -> str:
    """An endpoint URL with http:// or https:// and a host, else one line saying what is wrong
    (obstore would panic on some, and send to AWS with others)."""
    parts = urlsplit(endpoint)
    if "@" in urlsplit(endpoint if "://" in endpoint else f"//{endpoint}").netloc:  # said before it is quoted
        raise StoreError("endpoint: credentials in the URL are refused: use the environment or -o credentials_file",
                         errno.EINVAL)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        guess = f": did you mean http://{endpoint}?" if "://" not in endpoint else ""
        raise StoreError(f"endpoint {endpoint!r}: needs a scheme and a host, e.g. http://127.0.0.1:9000 or "
                         f"https://s3.example.org{guess}", errno.EINVAL)
    try:
        parts.port  # noqa: B018 -- urlsplit checks the port only when asked
    except ValueError:
        raise StoreError(f"endpoint {endpoint!r}: the port is not a number from 0 to 65535", errno.EINVAL) from None
    return endpoint


def _gcs_config(remote: RemoteOptions) -> tuple["GCSConfig", str | None]:
    config: GCSConfig = {}
    if remote.endpoint:
        config["base_url"] = check_endpoint(remote.endpoint)

    def from_file(path: str) -> tuple["GCSConfig", str]:
        return {"service_account": _private_file(path)}, f"the file {path}"
    return _cloud_config(remote, config, GCS_ENVIRONMENT, from_file)


def _azure_config(remote: RemoteOptions) -> tuple["AzureConfig", str | None]:
    config: AzureConfig = {}
    if remote.endpoint:
        config["endpoint"] = check_endpoint(remote.endpoint)

    def from_file(path: str) -> tuple["AzureConfig", str]:
        section = _ini_section(path, "azure", {"account_name", "account_key", "sas_key"})
        found: AzureConfig = {}
        if "account_name" in section:
            found["account_name"] = section["account_name"]
        if "account_key" in section:
            found["account_key"] = section["account_key"]
        if "sas_key" in section:
            found["sas_key"] = section["sas_key"]
        return found, f"the file {path} [azure]"
    return _cloud_config(remote, config, AZURE_ENVIRONMENT, from_file)


GCS_ENVIRONMENT = ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH", "GOOGLE_SERVICE_ACCOUNT_KEY",
                   "GOOGLE_APPLICATION_CREDENTIALS")
AZURE_ENVIRONMENT = ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_KEY", "AZURE_STORAGE_TOKEN", "AZURE_CLIENT_SECRET")


def _cloud_config(remote: RemoteOptions, config: CloudConfig, environment: tuple[str, ...],
                  from_file: Callable[[str], tuple[CloudConfig, str]]) -> tuple[CloudConfig, str | None]:
    """(client options, where the credentials come from; None: nowhere) for GCS or Azure: the
    endpoint in `config`, then -o anon, a credentials file (from_file(path) -> (options, where)),
    or the variables of the environment that the client reads itself."""
    if remote.anon:
        config["skip_signature"] = True
        return config, "nowhere: -o anon sends unsigned requests"
    if remote.credentials_file:
        found, where = from_file(remote.credentials_file)
        config.update(found)
        return config, where
    for name in environment:
        if os.environ.get(name):
            return config, f"the environment ({name})"
    return config, None


CONFIGS: dict[str, Callable[[RemoteOptions], tuple[Config, str | None]]] = {
    "s3": _s3_config, "gs": _gcs_config, "az": _azure_config}

AWS_KEYS = {"aws_access_key_id", "aws_secret_access_key", "aws_session_token"}  # obstore's names without aws_
AWS_SETTINGS = {"endpoint_url", "region"}  # honoured from the profile's section, as the AWS CLI does


def _aws_credentials(path: str | None) -> tuple["S3Config", str | None, dict[str, str]]:
    """(keys, where they came from, settings) from `path`, else from the environment (read by
    obstore itself), else from the shared credentials file."""
    if path is None:
        if os.environ.get("AWS_ACCESS_KEY_ID"):
            return {}, "the environment (AWS_ACCESS_KEY_ID)", {}
        if os.environ.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
            return {}, "the environment (AWS_WEB_IDENTITY_TOKEN_FILE)", {}
        path = os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.expanduser("~/.aws/credentials")
        if not os.path.exists(path):
            return {}, None, {}  # obstore asks the instance metadata service last
        private = False  # the AWS tools' own file: its permissions are the AWS tools' business
    else:
        private = True
    profile = os.environ.get("AWS_PROFILE", "default")
    section = _ini_section(path, profile, {*AWS_KEYS, *AWS_SETTINGS}, private)
    keys: S3Config = {}
    if "aws_access_key_id" in section:
        keys["access_key_id"] = section["aws_access_key_id"]
    if "aws_secret_access_key" in section:
        keys["secret_access_key"] = section["aws_secret_access_key"]
    if "aws_session_token" in section:
        keys["session_token"] = section["aws_session_token"]
    settings = {k: v for k, v in section.items() if k in AWS_SETTINGS}
    return keys, f"the file {path} [{profile}]", settings


def _ini_section(path: str, section: str, wanted: set[str], private: bool = True) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)  # a secret may hold '%'
    try:
        with open(_private_file(path) if private else path, encoding="utf-8") as f:
            parser.read_file(f)
    except OSError as e:
        raise StoreError(f"{path}: cannot read credentials ({e.strerror})", e.errno or errno.EACCES) from None
    except (configparser.Error, UnicodeDecodeError) as e:
        raise StoreError(f"{path}: cannot read credentials: {_where_malformed(e)}", errno.EINVAL) from None
    if section not in parser:
        raise StoreError(f"{path}: no [{section}] section", errno.EINVAL)
    return {k: v for k, v in parser[section].items() if k in wanted}


def _where_malformed(error: Exception) -> str:
    """What is wrong with a credentials file and on which line, never what the line holds:
    configparser's own messages quote it, and it may be a secret."""
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(error, configparser.MissingSectionHeaderError):
        return f"line {error.lineno} comes before any [section] header"
    if isinstance(error, configparser.ParsingError):
        lines = ", ".join(str(number) for number, _ in error.errors[:5])
        return f"line {lines} is not 'name = value'" if len(error.errors) == 1 else f"lines {lines} are not 'name = value'"
    if isinstance(error, (configparser.DuplicateSectionError, configparser.DuplicateOptionError)):
        return f"line {error.lineno} repeats a {'section' if isinstance(error, configparser.DuplicateSectionError) else 'name'}"
    return type(error).__name__


def _private_file(path: str) -> str:
    """`path`, refused when group or others may read it: credentials stay private."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise StoreError(f"{path}: {e.strerror}", e.errno) from None
    if stat.S_ISDIR(mode):
        raise StoreError(f"{path}: is a directory, not a credentials file: name the file itself", errno.EISDIR)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise StoreError(f"{path}: credentials file must not be readable by group or others (chmod 600)", errno.EACCES)
    return path
