"""obstore's errors said in one line a person can act on.

obstore's message is the request, the HTTP status, the server's body (an S3 or Azure XML
`<Error>`, a GCS JSON error) and a Rust debug dump of the cause chain. The cause that matters is
in there but rarely in the first line: `error sending request` hides a refused connection or a
failed TLS handshake, `403 Forbidden: <?xml ...` is cut before the `<Code>`, and a lookup of the
EC2 metadata service means that no credentials were found anywhere. `explain` picks it out.
"""

import errno
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

from zarrfs.stores.async_loop import first_line

# Where the cloud SDKs look last for credentials: an answer from there (or no answer) means that
# none were found in the environment or in a file.
METADATA_SERVICES = ("169.254.169.254", "metadata.google.internal", "/metadata/identity/oauth2/token",
                     "/latest/api/token")

NO_CREDENTIALS = {
    "s3": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a file with -o credentials_file=PATH, "
          "put them in ~/.aws/credentials (AWS_PROFILE picks the section), or use -o anon for a public bucket",
    "gs": "set GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT to a service-account JSON, name it with "
          "-o credentials_file=PATH, or use -o anon for a public bucket",
    "az": "set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or AZURE_STORAGE_SAS_KEY), name an "
          "INI file with an [azure] section with -o credentials_file=PATH, or use -o anon for a public container",
}

# The causes in the Rust dump, most specific first: (pattern, what it means).
CAUSES = (
    # reqwest follows redirects itself; a client that speaks HTTPS only refuses one to http://
    (re.compile(r"kind: Redirect,\s*source: reqwest::Error \{\s*kind: Builder,\s*url: \"(http://[^\"/?#]*)[^\"]*\","
                r"\s*source: BadScheme"),
     "{host} redirected to plain HTTP ({0}): refused, an https:// server is spoken to over HTTPS only"),
    (re.compile(r"error following redirect"), "{host} redirected too often or to an unusable address"),
    (re.compile(r"ConnectionRefused|Connection refused"), "connection refused: nothing listens at {host}"),
    (re.compile(r"InvalidCertificate\(\s*NotValidForName"), "TLS handshake with {host} failed: its certificate "
     "is for another host name (NotValidForName): use the name the certificate was issued for"),
    (re.compile(r"InvalidCertificate\(\s*(\w+)"), "TLS handshake with {host} failed: its certificate is not "
     "trusted ({0}); give the CA that signed it with -o ca_file=PATH"),
    (re.compile(r"InvalidContentType|CorruptMessage|InvalidMessage|HandshakeFailure|AlertReceived\((\w+)"),
     "TLS handshake with {host} failed: it does not answer as HTTPS (is it http://?)"),
    (re.compile(r"dns error|failed to lookup address", re.I), "cannot resolve the host name of {host}"),
    (re.compile(r"ConnectionReset|Connection reset"), "the connection to {host} was reset"),
    (re.compile(r"TimedOut|timed out|operation timed out", re.I), "{host} did not answer in time (-o timeout)"),
)

# fake-gcs-server answers a request to a missing bucket with a 500 naming the directory it did not
# find (`lstat /data/BUCKET: no such file or directory`); GCS itself answers 404 NoSuchBucket.
EMULATOR_MISSING_BUCKET = re.compile(r"non-2xx status code: 5\d\d [^:\n]*: .{0,200}?lstat [^\s<]*/([^/\s:<]{1,100}): "
                                     r"no such file or directory")

ACCESS_CODES = {  # S3 and Azure error codes that mean "these credentials may not": said as such
    "SignatureDoesNotMatch": "the secret key does not match the access key",
    "InvalidAccessKeyId": "the server does not know this access key",
    "AccessDenied": "these credentials may not do this",
    "AuthenticationFailed": "the account key or SAS does not authenticate",
    "AuthorizationFailure": "these credentials may not do this",
}
MISSING_BUCKET_CODES = {"NoSuchBucket", "ContainerNotFound"}


@dataclass(frozen=True)
class Explained:
    reason: str  # one line, no credentials
    errno: int
    code: str | None = None  # the server's error code (S3, Azure), if it sent one


def server_code(text: str) -> tuple[str | None, str | None]:
    """(Code, Message) of an S3 or Azure XML error body, or of a GCS JSON error, if there is one.
    The message is its first line: Azure's goes on with RequestId and Time lines, no use to a person."""
    code = re.search(r"<Code>([^<]{1,100})</Code>", text)
    message = re.search(r"<Message>([^<]{1,300})</Message>", text)
    if code is None:  # GCS: {"error": {"code": 404, "message": "...", "errors": [{"reason": "notFound"}]}}
        code = re.search(r'"reason"\s*:\s*"([^"]{1,100})"', text)
        message = message or re.search(r'"message"\s*:\s*"([^"]{1,300})"', text)
    first = re.split(r"\n|\\n", message.group(1).strip())[0].strip() if message else None
    return (code.group(1) if code else None, first or None)


def request_host(text: str) -> str:
    """scheme://host:port of the request obstore's message names, or 'the server'."""
    found = re.search(r"Error performing \w+ (https?://\S+)", text)  # not "Error performing list request:"
    if not found:
        return "the server"
    parts = urlsplit(found.group(1))
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else "the server"


def status_line(text: str) -> str | None:
    found = re.search(r"Server returned non-2xx status code: (\d{3} [^:\n]*)(?::\s*(.*))?", text)
    if not found:
        return None
    body = (found.group(2) or "").strip()
    return f"{found.group(1)}{': ' + body[:120] if body and not body.startswith('<') else ''}"


def explain(error: BaseException, scheme: str, credentials: str | None) -> Explained:
    """One line saying what went wrong with a request, naming where the credentials came from
    when they are the cause. `credentials` describes their source, never their value."""
    text = str(error)
    host = request_host(text)
    if any(service in text for service in METADATA_SERVICES):
        return Explained(f"no credentials found: {NO_CREDENTIALS.get(scheme, NO_CREDENTIALS['s3'])}", errno.EACCES)
    code, message = server_code(text)
    source = f"; credentials from {credentials}" if credentials else ""
    if code in ACCESS_CODES or isinstance(error, (PermissionDeniedError, UnauthenticatedError)):
        said = f"{code}: {message}" if code and message else code or status_line(text) or "403 Forbidden"
        meaning = ACCESS_CODES.get(code or "", "access denied")  # no code: a refusal said by status alone
        if message and "failed to authenticate" in message:  # Azurite says so under AuthorizationFailure
            meaning = ACCESS_CODES["AuthenticationFailed"]
        return Explained(f"access denied by {host}: {meaning} ({said}){source}", errno.EACCES, code)
    if code in MISSING_BUCKET_CODES:
        bucket = re.search(r"<BucketName>([^<]{1,100})</BucketName>", text)
        named = f" {bucket.group(1)!r}" if bucket else ""
        return Explained(f"the bucket{named} does not exist at {host} ({code})", errno.ENOENT, code)
    emulated = EMULATOR_MISSING_BUCKET.search(text)
    if emulated:
        return Explained(f"the bucket {emulated.group(1)!r} does not exist at {host} (the emulator's 500 for "
                         "a missing bucket)", errno.ENOENT)
    if code is not None:
        return Explained(f"{host} answered {code}{': ' + message if message else ''}", errno.EIO, code)
    for pattern, meaning in CAUSES:
        found = pattern.search(text)
        if found:
            return Explained(meaning.format(*(g for g in found.groups() if g), host=host), errno.EIO)
    status = status_line(text)
    if status:
        return Explained(f"{host} answered {status}", errno.EIO)
    return Explained(first_line(error), errno.EIO)  # a URL's query (a SAS token, a signature) left out


# How obstore says a request got no answer: hyper's "error sending request" (a reset or a closed
# connection while it went out), a connection closed before the answer, object_store's HTTP error
# kinds for both.
UNANSWERED = re.compile(r"error sending request|connection closed before message completed|"
                        r"kind: (Interrupted|Request|Connect)\b|ConnectionReset|Connection reset|BrokenPipe")
# How it says a request ran out of time (the attempt's share of -o timeout).
TIMED_OUT = re.compile(r"TimedOut|timed out|operation timed out|kind: Timeout\b", re.I)


def timed_out(error: BaseException) -> bool:
    """The request ran out of time (-o timeout) without an answer."""
    text = str(error)
    return status_line(text) is None and TIMED_OUT.search(text) is not None


def unanswered(error: BaseException) -> bool:
    """The request got no answer from the server (no HTTP status): whether it took effect is
    unknown. A timeout is not one of these: it used up the time a retry would need."""
    text = str(error)
    return status_line(text) is None and not TIMED_OUT.search(text) and UNANSWERED.search(text) is not None


# The client's own refusals of its configuration, before any request (obstore's builder errors):
# (pattern, what it means, for the credentials' source `{where}`).
NO_AZURE_ACCOUNT = ("no Azure storage account named: set AZURE_STORAGE_ACCOUNT_NAME (with AZURE_STORAGE_ACCOUNT_KEY "
                    "or AZURE_STORAGE_SAS_KEY), or give account_name in the [azure] section of "
                    "-o credentials_file=PATH")


def configuration_error(text: str, scheme: str, credentials: str | None) -> str | None:
    """What a refusal of the client's configuration means, in one line, or None if it is not one
    of those known. `credentials` is where they came from ("the file PATH [section]", "the
    environment (NAME)"), never their value."""
    from_file = credentials.removeprefix("the file ") if credentials and credentials.startswith("the file ") else None
    if "Account must be specified" in text:
        return NO_AZURE_ACCOUNT
    if "Missing SecretAccessKey" in text:
        if from_file:
            return f"{from_file}: aws_access_key_id without aws_secret_access_key: add it to that section"
        return ("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: set both, or unset AWS_ACCESS_KEY_ID "
                "to use ~/.aws/credentials or -o credentials_file=PATH")
    key_file = from_file or (f"the service-account key from {credentials}" if credentials else "the service-account key")
    if "Unable to decode service account file" in text:
        detail = text.partition("Unable to decode service account file: ")[2].splitlines()[0]
        return (f"{key_file}: not a service-account JSON key ({detail[:150]}): download the key again "
                "(IAM, Service accounts, Keys, JSON)")
    rsa = re.search(r"Invalid RSA key: (\w{1,60})", text)
    if rsa:
        return (f"{key_file}: its private_key is not a PEM RSA private key ({rsa.group(1)}): download the key "
                "again (IAM, Service accounts, Keys, JSON)")
    return None
