"""Hierarchy editing on any store: new groups and arrays (from a sidecar, an .npy or a text
draft), delete and move of whole nodes, each atomic on every store, with intent records so that an
interrupted edit is finished or undone at the next mount."""
