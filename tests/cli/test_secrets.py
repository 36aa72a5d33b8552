"""No message says a secret: a mistyped option whose value is a key, and a credentials file
that does not parse, are refused in one line that names the option or the file and line, never
what was written there. Run as users run it (a daemon, its log in a file)."""

import os
import subprocess

import pytest
import zarr

from mounting import ZARRFS, unmount

SECRET = "TOPSECRET456"
KEY_LIKE = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY"  # an AWS secret key's shape, pasted without a name


def refused(tmp_path, source, options: str, env=None):
    """(stderr, the log file's text) of a start-up that must fail."""
    mnt, log = tmp_path / "mnt", tmp_path / "zarrfs.log"
    mnt.mkdir(exist_ok=True)
    try:
        result = subprocess.run([ZARRFS, str(source), str(mnt), "-o", f"{options},log_file={log},"
                                 f"recovery_dir={tmp_path / 'recovery'}"], capture_output=True, text=True, timeout=60,
                                env=env)
    finally:
        unmount(mnt)
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr, log.read_text() if log.exists() else ""


@pytest.mark.parametrize("word", [f"secret_acces_key={SECRET}", f"aws_secret_access_key={SECRET}",
                                  f"sekret={SECRET}", SECRET, f"{SECRET}=x", KEY_LIKE])
def test_an_unknown_option_is_named_without_its_value(tmp_path, word):
    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(4,), chunks=(4,), dtype="uint8")
    stderr, log = refused(tmp_path, root, f"ro,{word}")
    assert stderr.startswith("zarrfs: unknown option"), stderr
    assert SECRET not in stderr + log and KEY_LIKE not in stderr + log


MALFORMED = {
    "a line without '='": (f"[default]\naws_access_key_id = AKID\n{SECRET} oops no equals\n", "line 3 is not 'name = value'"),
    "before any section": (f"aws_secret_access_key = {SECRET}\n[default]\n", "line 1 comes before any [section] header"),
    "a repeated name": (f"[default]\naws_secret_access_key = {SECRET}\naws_secret_access_key = {SECRET}2\n",
                        "line 3 repeats a name"),
    "a '%' in a secret": (f"[default]\naws_access_key_id = AKID\naws_secret_access_key = %{SECRET}\n",
                          "connection refused"),  # taken as written, as the AWS tools take it
    "not text": (b"[default]\naws_secret_access_key = \xff" + SECRET.encode() + b"\n", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_credentials_file_is_named_by_line_never_quoted(tmp_path, case):
    content, said = MALFORMED[case]
    credentials = tmp_path / "credentials"
    credentials.write_bytes(content if isinstance(content, bytes) else content.encode())
    credentials.chmod(0o600)
    env = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:1"}  # nothing listens: traffic stays here
    stderr, log = refused(tmp_path, "s3://bucket/a.zarr", f"ro,credentials_file={credentials},timeout=2", env)
    assert said in stderr, stderr
    assert SECRET not in stderr + log


SERVICE_ACCOUNTS = {  # what the GCS client cannot decode, and says so quoting the value
    "a value of the wrong type": f'{{"type": "service_account", "private_key": "k", "client_email": "a@b", '
                                 f'"disable_oauth": "{SECRET}"}}',
}


@pytest.mark.parametrize("case", SERVICE_ACCOUNTS)
def test_a_service_account_the_client_cannot_decode_is_not_quoted(tmp_path, case):
    account = tmp_path / "account.json"
    account.write_text(SERVICE_ACCOUNTS[case])
    account.chmod(0o600)
    stderr, log = refused(tmp_path, "gs://bucket/a.zarr", f"ro,credentials_file={account},"
                          "endpoint=http://127.0.0.1:1,timeout=2")
    assert f"{account}: not a service-account JSON key" in stderr, stderr
    assert SECRET not in stderr + log


def test_an_endpoint_with_credentials_but_no_scheme_is_refused_without_quoting_them(tmp_path):
    stderr, log = refused(tmp_path, "s3://bucket/a.zarr", f"ro,endpoint=AKID:{SECRET}@127.0.0.1:1,timeout=2")
    assert "endpoint: credentials in the URL are refused" in stderr and SECRET not in stderr + log, stderr
