"""The adapter to libfuse 3 through mfusepy: thin FUSE methods under one errno boundary,
zero-copy replies, invalidation of the kernel's page cache, request tracing. The only package that
imports the binding."""
