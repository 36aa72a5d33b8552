"""Codecs: the chain and its literal registry, the built-in codecs, one adapter over numcodecs,
decoders bounded by the chunk's declared size, blosc's blocks, and the shard format (index
encode/decode). Bytes in, bytes or arrays out; no store is read here."""
