"""The harness's release: read by the package root, by every trial record (which release wrote
it) and by the study database's version row. A module of its own, importing nothing, so that any
part may read it without loading the package root's shortcuts."""

__version__ = "0.1.0"
