"""Which tests share an expensive setup, so that ``-n N --dist loadgroup`` runs each such group on one
worker and the setup happens once, not once per worker (tests import it by name: the tests folder
is on the path because its conftest is there).

xdist's own ``loadgroup`` reads ``xdist_group`` marks by rewriting each test's node id, which
pytest 9.2 no longer lets a plugin do (the id is derived, not stored): the marks were silently
ignored and each worker started its own vLLM server and clusters. The groups are therefore given
to the scheduler itself, by path.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

#: a path under the repository (a folder ending in "/", or one test file) -> its group. The folders
#: share a session service (one real vLLM server; the Slurm and Ray clusters), the file a module
#: fixture that converts the model from scratch
SHARED_SETUP_GROUPS = {
    "tests/engine/vllm_backend/": "vllm",
    "tests/executors/": "clusters",
    "tests/engine/test_model_prepare.py": "model-prepare",
}


def shared_setup_scope(nodeid: str) -> str:
    """The unit a worker takes whole: the group of a test that shares a setup, else the test alone."""
    path = nodeid.split("::", 1)[0]
    for prefix, group in SHARED_SETUP_GROUPS.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return group
    return nodeid


class SharedSetupScheduling(LoadScopeScheduling):
    """xdist's load scheduling, one test at a time, but each shared-setup group as one unit."""

    def _split_scope(self, nodeid: str) -> str:
        return shared_setup_scope(nodeid)
