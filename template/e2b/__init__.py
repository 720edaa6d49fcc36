"""E2B's template formats: Template JSON and Dockerfiles, staged, run, cached (template/README.md)."""
