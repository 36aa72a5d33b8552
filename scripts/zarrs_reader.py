"""zarrs-python reading a whole remote array in a process of its own, for bench_remote.py.

    python scripts/zarrs_reader.py '{"s3": {"bucket": B, "prefix": P, "endpoint": URL}}'
    python scripts/zarrs_reader.py '{"http": {"url": URL}}'

zarrs-python waits for the network holding the GIL: in the bench's process it would stall the
delaying proxy, a thread there, until its GETs time out. Here it reads alone and prints
{"seconds": ..., "cpu": ...} (the read's wall time and this process's CPU time, every thread),
measured around the read, so the interpreter's start is not counted. S3 credentials come from
the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), never the command line.
"""

import json
import os
import sys
import time


def store(spec: dict):
    from obstore.store import HTTPStore, S3Store
    if "s3" in spec:
        s3 = spec["s3"]
        return S3Store(s3["bucket"], prefix=s3["prefix"], endpoint=s3["endpoint"], region="us-east-1",
                       access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                       secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"], client_options={"allow_http": True})
    return HTTPStore.from_url(spec["http"]["url"], client_options={"allow_http": True})


def main() -> None:
    import zarr
    from zarr.storage import ObjectStore
    spec = json.loads(sys.argv[1])
    with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True}):
        cpu, t0 = time.process_time(), time.perf_counter()
        zarr.open_array(ObjectStore(store(spec), read_only=True), mode="r")[...]
        print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - cpu}))


if __name__ == "__main__":
    main()
