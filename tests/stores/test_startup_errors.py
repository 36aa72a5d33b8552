"""What a new user sees when something is wrong, against a real S3-compatible server (SeaweedFS)
and a real other HTTP service (nginx): each mistake is one line on stderr naming the cause, a
non-zero exit status, and never a traceback or a Rust panic. The command runs as users run it,
without -f (the daemon forks and the parent says what the child found)."""

import base64
import json
import os
import re
import uuid

import numpy as np
import pytest
import zarr
from zarr.storage import ObjectStore

from mounting import failed_start, mounted
from servers.emulators import AZURE_ACCOUNT, AZURE_KEY
from servers.nginx import Nginx
from servers.seaweed import USERS, unique_prefix


def start_line(source, options, env, tmp_path, pattern) -> str:
    """The one line a start-up that must fail printed (mounting.failed_start), matching `pattern`."""
    line = failed_start(source, options, env, tmp_path)
    assert re.search(pattern, line), line
    for _, secret, _ in USERS.values():
        assert secret not in line
    return line


@pytest.fixture
def hierarchy(seaweed):
    prefix = unique_prefix("startup")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array(
        "a", shape=(4,), chunks=(2,), dtype="u1")[...] = 7
    return prefix


def without_aws(tmp_path) -> dict:
    """An environment with no AWS variables and a HOME with no ~/.aws: no credentials anywhere
    (obstore then asks the EC2 metadata service, which is no use here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(tmp_path / "home")
    return env


def test_an_endpoint_without_a_scheme_is_one_line_not_a_panic(seaweed, hierarchy, tmp_path):
    bare = seaweed.endpoint.removeprefix("http://")
    line = start_line(seaweed.url(hierarchy), [f"endpoint={bare}"], seaweed.env(), tmp_path, "needs a scheme")
    assert f"did you mean http://{bare}" in line


@pytest.mark.parametrize("endpoint", ["http://", "http://host:99999", "ftp://127.0.0.1:1", "://x", "http//x:1"])
def test_any_malformed_endpoint_is_one_line(seaweed, hierarchy, tmp_path, endpoint):
    start_line(seaweed.url(hierarchy), [f"endpoint={endpoint}"], seaweed.env(), tmp_path, r"endpoint .*(scheme|port)")


def test_a_missing_bucket_is_named(seaweed, tmp_path):
    start_line("s3://nosuchbucket/exp.zarr", [f"endpoint={seaweed.endpoint}"], seaweed.env(), tmp_path,
               r"bucket 'nosuchbucket' does not exist .*\(NoSuchBucket\)")


def test_an_endpoint_that_is_another_http_service_says_so(seaweed, tmp_path):
    (tmp_path / "site").mkdir()
    server = Nginx(tmp_path / "nginx", tmp_path / "site")
    server.start()
    try:
        line = start_line("s3://test/exp.zarr", [f"endpoint={server.url}"], seaweed.env(), tmp_path,
                          "does not answer as an object store")
    finally:
        server.stop()
    assert "404" in line and "not a Zarr hierarchy" not in line
    assert re.search(r"http://127\.0\.0\.1:\d+ answered 404", line), line  # the host asked, not "the server"


@pytest.mark.parametrize("case", ["wrong secret", "unknown key"])
def test_refused_credentials_show_the_code_and_where_they_came_from(seaweed, hierarchy, tmp_path, case):
    env = seaweed.env()
    if case == "wrong secret":
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
        code = "SignatureDoesNotMatch"
    else:
        env["AWS_ACCESS_KEY_ID"] = "AKUNKNOWN"
        code = "InvalidAccessKeyId"
    line = start_line(seaweed.url(hierarchy), [f"endpoint={seaweed.endpoint}"], env, tmp_path, code)
    assert "credentials from the environment (AWS_ACCESS_KEY_ID)" in line
    assert "not-the-secret" not in line


def test_refused_credentials_from_a_file_name_the_file(seaweed, hierarchy, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = AKADMIN\naws_secret_access_key = wrong-secret\n")
    credentials.chmod(0o600)
    line = start_line(seaweed.url(hierarchy), [f"endpoint={seaweed.endpoint}", f"credentials_file={credentials}"],
                      without_aws(tmp_path), tmp_path, "SignatureDoesNotMatch")
    assert f"credentials from the file {credentials} [default]" in line


def test_anonymous_requests_refused_say_they_were_anonymous(seaweed, hierarchy, tmp_path):
    start_line(seaweed.url(hierarchy), [f"endpoint={seaweed.endpoint}", "anon"], without_aws(tmp_path), tmp_path,
               "access denied .*-o anon sends unsigned requests")


def test_no_credentials_at_all_says_so_and_lists_the_ways(seaweed, hierarchy, tmp_path):
    line = start_line(seaweed.url(hierarchy), [f"endpoint={seaweed.endpoint}"], without_aws(tmp_path), tmp_path,
                      "no credentials found")
    assert "AWS_ACCESS_KEY_ID" in line and "credentials_file" in line and "-o anon" in line
    assert "169.254.169.254" not in line


def test_a_port_that_does_not_answer_is_connection_refused(seaweed, hierarchy, tmp_path):
    start_line(seaweed.url(hierarchy), ["endpoint=http://127.0.0.1:9"], seaweed.env(), tmp_path, "connection refused")


def test_https_against_plain_http_is_a_failed_tls_handshake(seaweed, hierarchy, tmp_path):
    endpoint = seaweed.endpoint.replace("http://", "https://")
    start_line(seaweed.url(hierarchy), [f"endpoint={endpoint}"], seaweed.env(), tmp_path, "TLS handshake .* failed")


def test_endpoint_url_in_the_credentials_file_is_honoured(seaweed, hierarchy, tmp_path):
    """As the AWS CLI does: the profile's endpoint_url is where the requests go (they went to AWS)."""
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[default]\naws_access_key_id = AKADMIN\naws_secret_access_key = secretadmin\n"
                           f"endpoint_url = {seaweed.endpoint}\n")
    credentials.chmod(0o600)
    with mounted(seaweed.url(hierarchy), tmp_path, f"credentials_file={credentials}", "ro",
                 env=without_aws(tmp_path)) as m:
        assert np.fromfile(m / "a.bin", "u1").tolist() == [7] * 4


def test_a_malformed_endpoint_url_in_the_file_is_one_line(seaweed, hierarchy, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = AKADMIN\naws_secret_access_key = secretadmin\n"
                           "endpoint_url = 127.0.0.1:9000\n")
    credentials.chmod(0o600)
    start_line(seaweed.url(hierarchy), [f"credentials_file={credentials}"], without_aws(tmp_path), tmp_path,
               "needs a scheme")


def test_aws_endpoint_url_in_the_environment_is_honoured(seaweed, hierarchy, tmp_path):
    env = {**seaweed.env(), "AWS_ENDPOINT_URL": seaweed.endpoint}
    with mounted(seaweed.url(hierarchy), tmp_path, "ro", env=env) as m:
        assert np.fromfile(m / "a.bin", "u1").tolist() == [7] * 4


def test_anon_with_a_credentials_file_is_refused_as_contradictory(seaweed, hierarchy, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = AKADMIN\naws_secret_access_key = secretadmin\n")
    credentials.chmod(0o600)
    start_line(seaweed.url(hierarchy), [f"endpoint={seaweed.endpoint}", "anon", f"credentials_file={credentials}"],
               without_aws(tmp_path), tmp_path, "anon .* credentials_file contradict")


# The other clouds, against their emulators: the same rule, one line naming the cause and the fix.

def clean_env(tmp_path, **more) -> dict:
    """No cloud's variables at all, and a HOME with no ~/.aws: only what the test gives."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_", "GOOGLE_"))}
    return {**env, "HOME": str(tmp_path / "home"), **more}


@pytest.fixture
def container(azurite):
    name = f"c{uuid.uuid4().hex[:12]}"
    azurite.make_container(name)
    zarr.open_group(ObjectStore(azurite.store(name, "data")), mode="w")
    return name


def test_azure_without_an_account_says_which_variables_name_it(azurite, container, tmp_path):
    line = start_line(f"az://{container}/data", azurite.mount_options(), clean_env(tmp_path), tmp_path,
                      "no Azure storage account named")
    assert "AZURE_STORAGE_ACCOUNT_NAME" in line and "credentials_file" in line and "Generic" not in line


def test_azure_endpoint_without_the_account_path_says_to_add_it(azurite, container, tmp_path):
    bare = azurite.endpoint.removesuffix(f"/{AZURE_ACCOUNT}")
    env = clean_env(tmp_path, AZURE_STORAGE_ACCOUNT_NAME=AZURE_ACCOUNT, AZURE_STORAGE_ACCOUNT_KEY=AZURE_KEY)
    line = start_line(f"az://{container}/data", [f"endpoint={bare}"], env, tmp_path,
                      f"the endpoint {bare} names no storage account")
    assert f"-o endpoint={bare}/{AZURE_ACCOUNT}" in line
    assert "RequestId" not in line and AZURE_KEY not in line


def test_a_wrong_azure_key_says_the_key_does_not_match(azurite, container, tmp_path):
    wrong_key = base64.b64encode(b"not the account's key, 64 bytes long as Azure's keys are........").decode()
    env = clean_env(tmp_path, AZURE_STORAGE_ACCOUNT_NAME=AZURE_ACCOUNT, AZURE_STORAGE_ACCOUNT_KEY=wrong_key)
    line = start_line(f"az://{container}/data", azurite.mount_options(), env, tmp_path,
                      "the account key or SAS does not authenticate")
    assert "may not do this" not in line and wrong_key not in line
    assert "credentials from the environment (AZURE_STORAGE_ACCOUNT_KEY)" in line


def test_an_access_key_without_its_secret_names_the_missing_one(seaweed, hierarchy, tmp_path):
    env = clean_env(tmp_path, AWS_ACCESS_KEY_ID="AKADMIN")
    line = start_line(seaweed.url(hierarchy), [f"endpoint={seaweed.endpoint}"], env, tmp_path,
                      "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
    assert "Generic" not in line


def test_a_credentials_file_with_an_access_key_and_no_secret_names_the_file(seaweed, hierarchy, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = AKADMIN\n")
    credentials.chmod(0o600)
    start_line(seaweed.url(hierarchy), [f"endpoint={seaweed.endpoint}", f"credentials_file={credentials}"],
               clean_env(tmp_path), tmp_path, rf"{credentials} \[default\]: aws_access_key_id without "
               "aws_secret_access_key")


def test_a_credentials_file_that_is_a_directory_says_so(seaweed, hierarchy, tmp_path):
    (tmp_path / "creds").mkdir()
    (tmp_path / "creds").chmod(0o755)  # as directories are made: what the old message took for a mode problem
    line = start_line(seaweed.url(hierarchy), [f"endpoint={seaweed.endpoint}", f"credentials_file={tmp_path / 'creds'}"],
                      clean_env(tmp_path), tmp_path, "is a directory, not a credentials file")
    assert "chmod" not in line


@pytest.fixture
def bucket(fake_gcs):
    name = f"b{uuid.uuid4().hex[:12]}"
    fake_gcs.make_bucket(name)
    return name


@pytest.mark.parametrize("content", ["{not json", '{"type": "service_account"}', "[]"])
def test_a_service_account_file_that_is_not_one_is_named(fake_gcs, bucket, tmp_path, content):
    account = tmp_path / "sa.json"
    account.write_text(content)
    account.chmod(0o600)
    line = start_line(f"gs://{bucket}/data", [*fake_gcs.mount_options(f"credentials_file={account}"), "ro"],
                      clean_env(tmp_path), tmp_path, f"{account}: not a service-account JSON key")
    assert "Generic" not in line


def test_a_service_account_with_a_bad_private_key_says_which_field(fake_gcs, bucket, tmp_path):
    account = fake_gcs.service_account(tmp_path)
    document = json.loads(account.read_text())
    document["private_key"] = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"
    account.write_text(json.dumps(document))
    line = start_line(f"gs://{bucket}/data", [*fake_gcs.mount_options(f"credentials_file={account}"), "ro"],
                      clean_env(tmp_path), tmp_path, f"{account}: its private_key is not a PEM RSA private key")
    assert "AwsLc" not in line and "bm90IGEga2V5" not in line


def test_a_missing_gcs_bucket_is_said_as_one(fake_gcs, tmp_path):
    """fake-gcs-server answers a missing bucket with a 500 naming its directory (GCS: 404)."""
    line = start_line("gs://nosuchbucket/data", [*fake_gcs.mount_options("anon"), "ro"], clean_env(tmp_path),
                      tmp_path, r"the bucket 'nosuchbucket' does not exist at http://127\.0\.0\.1:\d+")
    assert "lstat" not in line
