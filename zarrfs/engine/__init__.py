"""The array engine: chunk-grid geometry applied to stored arrays. Array reads and writes
boxes of elements through chunks and inner chunks (a shard is an array over a shard), write-back
encodes dirty chunks, the flat file maps byte offsets of NAME.bin onto boxes, and the caches,
decode-ahead and hole detection keep it fast. Recovery saves what write-back could not store."""
