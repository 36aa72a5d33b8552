"""gs:// end to end through real mounts against fake-gcs-server: reads byte-exact (sharded,
compressed, plain), listing, and the ways of giving credentials (a service-account file,
anonymous, none at all). Writes are not tested here: fake-gcs-server takes no XML API PUT,
which is how obstore (object_store) writes to GCS, so the fixture uploads through the JSON API."""

import os
import uuid

import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

from mounting import failed_start, mounted


@pytest.fixture
def bucket(fake_gcs):
    name = f"b{uuid.uuid4().hex[:12]}"
    fake_gcs.make_bucket(name)
    return name


def environment() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "AWS_", "AZURE_"))}


def written(fake_gcs, bucket, tmp_path):
    """A hierarchy zarr-python wrote locally, uploaded below data/; returns its arrays' values."""
    local = tmp_path / "local.zarr"
    root = zarr.open_group(str(local), mode="w")
    values = {
        "g/s": np.random.default_rng(7).normal(size=(40, 36)).astype("<f4"),
        "b": np.arange(300, dtype="<i2").reshape(10, 30),
        "p": np.arange(9, dtype="<u8"),
    }
    root.create_group("g").create_array("s", shape=(40, 36), chunks=(8, 12), shards=(16, 36), dtype="f4",
                                        compressors=[ZstdCodec(level=1)])[...] = values["g/s"]
    root.create_array("b", shape=(10, 30), chunks=(4, 7), dtype="i2",
                      compressors=[BloscCodec(cname="lz4")])[...] = values["b"]
    root.create_array("p", shape=(9,), chunks=(4,), dtype="u8", compressors=None)[...] = values["p"]
    fake_gcs.upload(bucket, local, "data")
    return values


def check(m, values):
    for name, expected in values.items():
        got = np.frombuffer((m / f"{name}.bin").read_bytes(), expected.dtype).reshape(expected.shape)
        assert np.array_equal(got, expected), name


def test_reads_byte_exact_anonymously(fake_gcs, bucket, tmp_path):
    values = written(fake_gcs, bucket, tmp_path)
    with mounted(f"gs://{bucket}/data", tmp_path, *fake_gcs.mount_options("ro", "anon"), env=environment()) as m:
        check(m, values)
        assert {"g", "b.bin", "p.bin"} <= set(os.listdir(m.path))


def test_reads_with_a_service_account_file(fake_gcs, bucket, tmp_path):
    values = written(fake_gcs, bucket, tmp_path)
    account = fake_gcs.service_account(tmp_path)
    with mounted(f"gs://{bucket}/data", tmp_path, *fake_gcs.mount_options("ro", f"credentials_file={account}"),
                 env=environment()) as m:
        check(m, values)


def start(fake_gcs, source, tmp_path, options, env):
    return failed_start(source, [*fake_gcs.mount_options(*options), "ro"], env, tmp_path)


def test_no_credentials_at_all_lists_the_ways(fake_gcs, bucket, tmp_path):
    written(fake_gcs, bucket, tmp_path)
    line = start(fake_gcs, f"gs://{bucket}/data", tmp_path, [], environment())
    assert "no credentials found" in line and "GOOGLE_APPLICATION_CREDENTIALS" in line and "-o anon" in line, line
    assert "169.254.169.254" not in line


def test_a_missing_bucket_is_one_line_naming_it(fake_gcs, tmp_path):
    """fake-gcs-server answers a missing bucket with a 500 (GCS itself: 404 NoSuchBucket, which
    the S3 tests cover); either way one line, not "not a Zarr hierarchy"."""
    line = start(fake_gcs, "gs://nosuchbucket/data", tmp_path, ["anon"], environment())
    assert "nosuchbucket" in line and "not a Zarr hierarchy" not in line, line


def test_a_service_account_file_others_may_read_is_refused(fake_gcs, bucket, tmp_path):
    account = fake_gcs.service_account(tmp_path)
    account.chmod(0o644)
    line = start(fake_gcs, f"gs://{bucket}/data", tmp_path, [f"credentials_file={account}"], environment())
    assert "must not be readable by group or others" in line, line
