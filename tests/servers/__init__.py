"""Real servers for tests and benchmarks (SeaweedFS for S3, nginx for HTTP), started on free loopback
ports and always stopped. Imported by tests/ and scripts/, never by the file system itself."""
