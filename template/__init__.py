"""Templates of one's own: the build side of `make template=DIR` (template/README.md)."""
