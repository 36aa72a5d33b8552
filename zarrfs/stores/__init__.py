"""Where bytes live. A store answers get (whole, a range or a suffix), stage and publish (an
atomic replace), delete, listing, conditional writes and modification times: the local store (every
path opened beneath the root, so nothing outside it is touched), the object store (S3, GCS, Azure,
HTTP through obstore), whole-node operations for each, and the SOURCE-URL factory."""
