"""One vLLM server on loopback, started with the trial and gone with it, whatever ends the trial.

The harness starts a small watchdog, not vLLM itself: the watchdog (run by the vLLM
environment's Python, a few lines, no vLLM import) leads a process group of its own, arms
``PR_SET_PDEATHSIG`` (``prctl`` through ctypes) so the kernel sends it SIGTERM when the harness's
process dies, kill -9 included, and starts the vLLM API server in its group. vLLM's engine core
and workers are further children; when the API server alone is killed they live on (seen with
0.32), so every way out of the watchdog ends the whole group: on SIGTERM it passes SIGTERM on,
waits the grace period, then SIGKILLs the group, itself included; when the server exits on its
own it logs the exit code and does the same. ``stop`` sends SIGTERM to the group, waits, then
SIGKILL. The death signal fires when the *thread* that started the server ends: start it from
the thread that lives as long as the trial (its main thread).

Readiness is polled: ``/health`` every ``POLL_S`` while the process is alive, until a deadline;
a process that exits first, or a deadline passed, is a ``VllmStartError`` that names the log.
The server's output goes to a log file under the trial's folder. The server runs with the
settings ``client.VllmClient`` relies on: ``--logprobs-mode processed_logprobs`` (the sampler's
log-probs after temperature, as the ``hf`` backend's), ``--generation-config vllm`` (the model
folder's generation defaults are not applied), ``--seed`` (a per-request seed fails on the CPU
backend: "CPU Generator does not use offset"), runtime LoRA loading, and
``VLLM_SERVER_DEV_MODE=1`` for the in-place weight reload (``/collective_rpc``) and the prefix
cache reset; it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import deque
from pathlib import Path

from harness.engine.vllm.client import VllmClient
from harness.engine.vllm.environment import is_cpu_build, vllm_child_env
from harness.engine.vllm.errors import VllmDiedError, VllmStartError
from harness.errors import squeeze

HOST = "127.0.0.1"
POLL_S = 0.5
#: the LoRA ranks vLLM 0.32 accepts for --max-lora-rank (``vllm.config.lora.MaxLoRARanks``)
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: the KV cache vLLM's CPU build reserves unless told otherwise: explicit, as its default claims
#: 92% of the machine's memory (and refuses to start when that much is not free)
CPU_KV_CACHE_BYTES = 1 << 30
LOG_TAIL_LINES = 3
#: how long a server that stopped answering is given to be seen exiting
DEATH_WAIT_S = 5.0

#: the watchdog, run as ``python -c WATCHDOG <harness pid> <grace s> <server argv...>``
WATCHDOG = r"""
import ctypes, os, signal, subprocess, sys, time
parent, grace, argv = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != parent:  # the harness died before the death signal was armed
    sys.exit(1)
asked = []
signal.signal(signal.SIGTERM, lambda *_: asked.append(True))
server = subprocess.Popen(argv)
while server.poll() is None and not asked:
    time.sleep(0.1)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if asked:
    os.killpg(0, signal.SIGTERM)
    try:
        server.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
else:
    print(f"[harness] vLLM server exited with code {server.returncode}", file=sys.stderr, flush=True)
os.killpg(0, signal.SIGKILL)  # whatever is left of the group, this watchdog included
"""


def lora_rank_slot(rank: int) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds adapters of rank ``rank``."""
    fits = [r for r in LORA_RANKS if r >= rank]
    if not fits:
        raise ValueError(f"LoRA rank {rank} is over vLLM's largest, {LORA_RANKS[-1]}")
    return fits[0]


def free_port() -> int:
    """A port nothing listens on now (the OS picks it); the server binds it a moment later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class VllmServer:
    """A vLLM OpenAI-compatible server of ``model_folder`` on 127.0.0.1, started by ``start``
    (or ``with``) and ended by ``stop`` (or leaving the ``with``).

    ``lora_rank``: serve LoRA adapters up to this rank (``max_loras`` of them in one batch);
    None serves the base model only. ``model_name`` is the name requests give for the base.
    ``kv_cache_bytes``: the KV cache; None: ``CPU_KV_CACHE_BYTES`` on vLLM's CPU build, vLLM's
    own sizing (``--gpu-memory-utilization``) on a GPU build."""

    def __init__(
        self,
        python: str,
        model_folder: str | Path,
        *,
        log_path: str | Path,
        seed: int = 0,
        lora_rank: int | None = None,
        max_loras: int = 1,
        dtype: str = "float32",
        model_name: str = "base",
        max_model_len: int | None = None,
        kv_cache_bytes: int | None = None,
        start_timeout_s: float = 600.0,
        stop_grace_s: float = 15.0,
    ):
        self.python, self.model_folder = str(python), str(model_folder)
        self.log_path = Path(log_path)
        self.seed, self.lora_rank, self.max_loras, self.dtype = seed, lora_rank, max_loras, dtype
        self.model_name, self.max_model_len, self.kv_cache_bytes = model_name, max_model_len, kv_cache_bytes
        self.start_timeout_s, self.stop_grace_s = start_timeout_s, stop_grace_s
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        #: the process group of the last start (its watchdog's pid), kept after ``stop``
        self.pgid: int | None = None

    # ---- what is started --------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the vLLM server has not been started")
        return f"http://{HOST}:{self.port}"

    def server_argv(self, port: int) -> list[str]:
        """The vLLM server's command line (an argument list: never a shell string)."""
        argv = [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model_folder,
            "--served-model-name",
            self.model_name,
            "--host",
            HOST,
            "--port",
            str(port),
            "--dtype",
            self.dtype,
            "--seed",
            str(self.seed),
            "--logprobs-mode",
            "processed_logprobs",
            "--generation-config",
            "vllm",
        ]
        kv_cache = self.kv_cache_bytes
        if kv_cache is None and is_cpu_build(self.python):
            kv_cache = CPU_KV_CACHE_BYTES
        if kv_cache is not None:
            argv += ["--kv-cache-memory-bytes", str(kv_cache)]
        if self.max_model_len is not None:
            argv += ["--max-model-len", str(self.max_model_len)]
        if self.lora_rank is not None:
            argv += ["--enable-lora", "--max-lora-rank", str(lora_rank_slot(self.lora_rank))]
            argv += ["--max-loras", str(self.max_loras)]
        return argv

    def server_env(self) -> dict[str, str]:
        """The server's environment: the harness's, less ``PYTHONPATH`` and the API key, with
        runtime LoRA loading, the weight-reload routes, no usage reports and no hub look-ups."""
        env = vllm_child_env()
        env.update(
            VLLM_ALLOW_RUNTIME_LORA_UPDATING="True",
            VLLM_SERVER_DEV_MODE="1",
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            HF_HUB_OFFLINE="1",
        )
        return env

    # ---- life -------------------------------------------------------------------------------

    def start(self) -> VllmServer:
        """Start the server and wait until ``/health`` answers; a VllmStartError (and nothing
        left running) when the process exits first or the deadline passes."""
        if self.process is not None:
            raise RuntimeError("the vLLM server is already started")
        self.port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [self.python, "-c", WATCHDOG, str(os.getpid()), str(self.stop_grace_s), *self.server_argv(self.port)]
        with open(self.log_path, "ab") as log:
            try:
                self.process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.server_env(),
                    start_new_session=True,  # its own process group: stopped as one
                )
            except OSError as err:
                raise VllmStartError(f"cannot run the vLLM environment's Python {self.python}: {err}") from None
        self.pgid = self.process.pid
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        probe = VllmClient(self.base_url, vocab_size=1)
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.process.poll() is not None:
                raise VllmStartError(
                    f"the vLLM server of {self.model_folder} stopped before it was ready ({self._log_tail()})"
                )
            if probe.healthy(timeout_s=POLL_S * 4):
                return
            if time.monotonic() > deadline:
                raise VllmStartError(
                    f"the vLLM server of {self.model_folder} did not answer /health within "
                    f"{self.start_timeout_s:g} s ({self._log_tail()})"
                )
            time.sleep(POLL_S)

    def died(self, wait_s: float = DEATH_WAIT_S) -> VllmDiedError | None:
        """The error to fail with when the server's process has exited, else None. A request
        that broke off may come a moment before the process is gone: it is given ``wait_s``."""
        if self.process is None:
            return None
        try:
            self.process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None
        return VllmDiedError(f"the vLLM server at {self.base_url} stopped running ({self._log_tail()})")

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after the grace period; idempotent."""
        if self.process is None:
            return
        pgid = self.pgid  # the watchdog leads the group (start_new_session)
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=self.stop_grace_s + 5)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(pgid, signal.SIGKILL)  # whatever is left of the group (the watchdog ends it too)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.process = None

    def client(self, *, vocab_size: int, timeout_s: float = 600.0) -> VllmClient:
        """A client of this server whose failures to answer name the server's death, if it died."""
        return VllmClient(self.base_url, vocab_size=vocab_size, timeout_s=timeout_s, on_unreachable=self.died)

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _log_tail(self) -> str:
        """The log's last lines, on one line, and where the log is. The watchdog's own line, last
        when the server exited, gives the server's exit code."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                tail = [line.strip() for line in deque(f, maxlen=LOG_TAIL_LINES) if line.strip()]
        except OSError:
            tail = []
        last = squeeze(" | ".join(tail), 300) if tail else "no output"
        return f"last log lines: {last}; log: {self.log_path}"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
