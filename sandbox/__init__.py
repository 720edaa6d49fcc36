"""The build sandbox: mkosi confined, paths inside an image root, text escaped for the terminal, a template's guard record (sandbox/README.md)."""
