"""Real schedulers for the executor tests: a single-host Slurm and a two-node Ray cluster.

Both run on this machine only and on loopback: every daemon listens on 127.0.0.1 only and every
node's address is 127.0.0.1 (checked when they start: the tests' traffic never leaves the
machine), on free ports, in short temporary folders (a munge socket path must fit in a Unix
socket name), for the whole session; every process they start is the test session's own and is
stopped by its process group (never ``ray stop``, which would stop any Ray on the machine).

- **Slurm** (Debian: ``apt-get install slurm-wlm munge``; CI's ``.ci/run`` installs them): a
  munged with its own key and socket, ``slurmctld -D`` and ``slurmd -D`` on a ``slurm.conf``
  written here (one node ``localhost`` at 127.0.0.1 with this machine's CPUs, partition
  ``debug``; the daemons bind to that address, not every interface; no cgroup plugins, which a
  container does not give; no accounting daemon, so ``sacct`` answers nothing and submitit warns
  that it falls back to ``squeue``). ``slurm_cluster`` puts ``SLURM_CONF`` in the test's
  environment, so ``sbatch``, ``squeue``, ``scancel`` and submitit reach it, and cancels every
  job the test left.
- **Ray** (``pip install -e '.[ray]'``): ``ray start --head`` and a second node joined to it
  carrying the custom resource ``second_node``, each ``ray start --block`` in a process group of
  its own, so ``kill_second_node()`` kills that node (raylet, agents, the workers running its
  tasks) with one signal. Both run with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, without which
  Ray turns ``--node-ip-address=127.0.0.1`` into the machine's network address and listens on
  every interface; the second node starts through ``ray_loopback_node.py`` (``ray start`` refuses
  to add a node with that setting). ``ray_cluster`` brings a killed second node back before each
  test and puts ``RAY_ADDRESS`` (the GCS address) and the setting in the test's environment (and
  in its already imported Ray); ``dashboard_url`` serves the state API. (Ray Client, ``ray://``,
  is left out: its per-client server starts too slowly for a test on a busy machine.)

Missing binaries, or a cluster that does not come up within ``STARTUP_TIMEOUT_S`` (on an idle
machine; stretched by the load, :class:`slowness.Deadline`), skip the tests
that need it with the reason (and the daemons' log tail).
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from local_servers import free_port
from slowness import Deadline

STARTUP_TIMEOUT_S = 30.0
SLURM_DAEMONS = ("munged", "slurmctld", "slurmd")
SECOND_NODE_RESOURCE = "second_node"
LOOPBACK = "127.0.0.1"
#: the test cluster's Ray settings, for its nodes and the test's driver: 127.0.0.1 stays a node's
#: address (and where it binds) instead of the machine's own; no token authentication, whatever
#: token the user's ~/.ray holds (which would turn it on and lock the state API's plain requests out)
RAY_TEST_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
RAY_LOOPBACK_NODE = Path(__file__).resolve().parent / "ray_loopback_node.py"
OBJECT_STORE_BYTES = 100 * 1024 * 1024  # Ray's floor is 75 MiB; the tests move no large objects


class ClusterUnavailable(Exception):
    """The daemons could not be started here; the message says why (and shows their logs)."""


def _stop_group(proc: subprocess.Popen | None, wait_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL, the process group ``proc`` leads (it was started in a session of its own)."""
    if proc is None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    try:  # children that outlived their leader
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.wait(timeout=wait_s)


def listening(groups: list[int]) -> list[str]:
    """The TCP addresses (``host:port``) that processes of these process groups listen on."""
    import psutil  # Ray's own dependency

    found = []
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status != psutil.CONN_LISTEN or conn.pid is None:
            continue
        try:
            if os.getpgid(conn.pid) in groups:
                found.append(f"{conn.laddr.ip.removeprefix('::ffff:')}:{conn.laddr.port}")
        except ProcessLookupError:
            continue
    return found


def assert_loopback_only(groups: list[int], what: str) -> None:
    """``what`` listens, and only on 127.0.0.1: the tests' traffic never leaves this machine."""
    found = listening(groups)
    assert found, f"{what}: no listening socket found (the check would be empty)"
    beyond = [address for address in found if address.rsplit(":", 1)[0] != LOOPBACK]
    assert not beyond, f"{what} listens beyond 127.0.0.1: {beyond}"


def _tail(*paths: Path, chars: int = 1500) -> str:
    parts = []
    for path in paths:
        if path.exists():
            text = path.read_text(errors="replace").strip()
            if text:
                parts.append(f"--- {path.name}:\n{text[-chars:]}")
    return "\n".join(parts)


def _start(cmd: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


# --------------------------------------------------------------------------------------------
# Slurm


def _memory_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 1024


@dataclass
class SlurmCluster:
    """One Slurm node, ``localhost``, in partition ``debug``; ``env`` is what a client needs."""

    root: Path
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    memory_mb: int = field(default_factory=lambda: _memory_mb() // 2)
    partition: str = "debug"
    node: str = "localhost"
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """A Slurm client command (``sinfo``, ``squeue``, ``scancel``, ``scontrol``) against this cluster."""
        return subprocess.run(
            list(args), env={**os.environ, **self.env}, capture_output=True, text=True, timeout=timeout
        )

    def jobs(self) -> dict[str, str]:
        """Every job Slurm still knows of, running or pending: job id -> state (``squeue``)."""
        out = self.run("squeue", "-h", "-o", "%i %T")
        return dict(line.split(None, 1) for line in out.stdout.splitlines() if line.strip())

    def node_state(self) -> str:
        out = self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%T")
        return out.stdout.strip() if out.returncode == 0 else ""

    def logs(self) -> str:
        return _tail(*(self.root / f"{name}.log" for name in SLURM_DAEMONS))

    def write_config(self, ctld_port: int, slurmd_port: int) -> None:
        r = self.root
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=harness",
                    "SlurmctldHost=localhost(127.0.0.1)",
                    f"SlurmctldPort={ctld_port}",
                    f"SlurmdPort={slurmd_port}",
                    f"SlurmUser={getpass.getuser()}",
                    f"SlurmdUser={getpass.getuser()}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={r / 'munge.socket'}",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'slurmd.pid'}",
                    f"SlurmctldLogFile={r / 'slurmctld.log'}",
                    f"SlurmdLogFile={r / 'slurmd.log'}",
                    # a container has no cgroups to give: track job processes by their parents
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "MpiDefault=none",
                    "MailProg=/bin/true",
                    # bind to the hosts' addresses (127.0.0.1) rather than every interface
                    "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
                    "JobRequeue=1",
                    "ReturnToService=2",
                    "SlurmdTimeout=30",
                    "InactiveLimit=0",
                    "KillWait=5",
                    "MinJobAge=300",
                    f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus}"
                    f" RealMemory={self.memory_mb} State=UNKNOWN",
                    f"PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )

    def start(self) -> None:
        missing = [name for name in SLURM_DAEMONS if shutil.which(name) is None]
        missing += [name for name in ("sinfo", "sbatch", "squeue", "scancel") if shutil.which(name) is None]
        if missing:
            raise ClusterUnavailable(
                f"Slurm/munge not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge"
            )
        r = self.root
        os.chmod(r, 0o755)  # munged wants the socket's folder reachable by every user
        for name in ("state", "spool"):
            (r / name).mkdir()
        keydir = r / "munge"
        keydir.mkdir(mode=0o700)
        key = keydir / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self.write_config(free_port(), free_port())
        env = {**os.environ, **self.env}
        munged = [
            "munged",
            "--foreground",
            "--force",
            f"--socket={r / 'munge.socket'}",
            f"--key-file={key}",
            f"--pid-file={r / 'munged.pid'}",
            f"--seed-file={r / 'munged.seed'}",
            f"--log-file={r / 'munged.log'}",
        ]
        self.procs["munged"] = _start(munged, r / "munged.out", env, r)
        self._wait(lambda: (r / "munge.socket").exists(), "munged did not create its socket")
        self.procs["slurmctld"] = _start(["slurmctld", "-D", "-i"], r / "slurmctld.out", env, r)
        self.procs["slurmd"] = _start(["slurmd", "-D", "-N", self.node], r / "slurmd.out", env, r)
        self._wait(lambda: self.node_state() == "idle", "the Slurm node did not become idle")
        assert_loopback_only([proc.pid for proc in self.procs.values()], "the Slurm daemons")

    def _wait(self, ready, what: str) -> None:
        deadline = Deadline(STARTUP_TIMEOUT_S)
        while not deadline.passed():
            dead = [name for name, proc in self.procs.items() if proc.poll() is not None]
            if dead:
                raise ClusterUnavailable(f"{', '.join(dead)} exited at start:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.3)
        raise ClusterUnavailable(f"{what} within {deadline.limit():.0f}s:\n{self.logs()}")

    def cancel_all(self, wait_s: float = 30.0) -> None:
        """Cancel every job and wait until none is left running (a cancelled job's steps get
        ``KillWait`` to end); a node left down or drained is returned to service."""
        if self.jobs():
            self.run("scancel", "--user", getpass.getuser())
        deadline = Deadline(wait_s)
        while not deadline.passed() and any(s not in ("COMPLETED", "CANCELLED") for s in self.jobs().values()):
            time.sleep(0.3)
        if self.node_state() not in ("idle", "mixed", "allocated"):
            self.run("scontrol", "update", f"NodeName={self.node}", "State=RESUME")

    def stop(self) -> None:
        try:
            if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
                self.cancel_all(wait_s=15)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for name in reversed(SLURM_DAEMONS):
            _stop_group(self.procs.pop(name, None))
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_daemons():
    """munged, slurmctld and slurmd for the session (skips with the reason when they cannot run)."""
    cluster = SlurmCluster(Path(tempfile.mkdtemp(prefix="hslurm-")))
    try:
        cluster.start()
    except (ClusterUnavailable, OSError, subprocess.SubprocessError) as exc:
        cluster.stop()
        pytest.skip(f"no single-host Slurm: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture
def slurm_cluster(slurm_daemons, monkeypatch):
    """The session's Slurm with ``SLURM_CONF`` in this test's environment (``sbatch``, submitit
    and every subprocess reach it); jobs the test left are cancelled after it."""
    slurm_daemons.cancel_all()
    for name, value in slurm_daemons.env.items():
        monkeypatch.setenv(name, value)
    yield slurm_daemons
    slurm_daemons.cancel_all()


# --------------------------------------------------------------------------------------------
# Ray


def _ray_command() -> list[str]:
    ray = Path(sys.executable).parent / "ray"
    return [str(ray)] if ray.exists() else [sys.executable, "-m", "ray.scripts.scripts"]


@dataclass
class RayCluster:
    """A head node (one CPU) and a second node (one CPU and the resource ``second_node``).

    ``address`` is the GCS address (``ray.init(address=...)``, ``RAY_ADDRESS``); ``dashboard_url``
    serves the state API (``ray.util.state.list_tasks(address=...)``)."""

    root: Path
    second_node_resource: str = SECOND_NODE_RESOURCE  # what a task asks for to run on the second node
    port: int = field(default_factory=free_port)
    dashboard_port: int = field(default_factory=free_port)
    head: subprocess.Popen | None = None
    second: subprocess.Popen | None = None
    second_starts: int = 0

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://{LOOPBACK}:{self.dashboard_port}"

    @property
    def env(self) -> dict[str, str]:
        """What a test's driver needs: the cluster's address, and Ray keeping 127.0.0.1 as it is."""
        return {"RAY_ADDRESS": self.address, **RAY_TEST_ENV}

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            **RAY_TEST_ENV,
            "RAY_USAGE_STATS_ENABLED": "0",
            # a killed node is declared dead after about 3 s instead of about 15 s
            "RAY_health_check_initial_delay_ms": "1000",
            "RAY_health_check_period_ms": "1000",
            "RAY_health_check_timeout_ms": "1000",
            "RAY_health_check_failure_threshold": "3",
        }

    def _node_args(self, temp: Path) -> list[str]:
        temp.mkdir(exist_ok=True)
        return [
            "--block",
            f"--node-ip-address={LOOPBACK}",
            "--num-cpus=1",
            "--num-gpus=0",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            f"--temp-dir={temp}",
            "--disable-usage-stats",
        ]

    def logs(self) -> str:
        return _tail(*sorted(self.root.glob("*.out")))

    def nodes(self) -> list[dict]:
        """The cluster's nodes as the state API lists them (``state`` ALIVE or DEAD, ``resources_total``)."""
        with urllib.request.urlopen(f"{self.dashboard_url}/api/v0/nodes?limit=100&detail=1", timeout=5) as resp:
            payload = json.load(resp)
        return payload["data"]["result"]["result"]

    def alive(self) -> list[dict]:
        try:
            return [node for node in self.nodes() if node.get("state") == "ALIVE"]
        except (OSError, ValueError, KeyError):
            return []

    def second_node_alive(self) -> bool:
        return any(self.second_node_resource in node.get("resources_total", {}) for node in self.alive())

    def start(self) -> None:
        try:
            import ray  # noqa: F401  (the driver side the tests use)
        except ImportError as exc:
            raise ClusterUnavailable(f"ray is not installed ({exc}): pip install -e '.[ray]'") from exc
        head = [
            *_ray_command(),
            "start",
            "--head",
            f"--port={self.port}",
            "--include-dashboard=true",
            f"--dashboard-host={LOOPBACK}",
            f"--dashboard-port={self.dashboard_port}",
            f"--ray-client-server-port={free_port()}",
            *self._node_args(self.root / "head"),
        ]
        self.head = _start(head, self.root / "head.out", self._env(), self.root)
        self._wait(lambda: len(self.alive()) == 1, "the Ray head node did not come up", [self.head])
        self.start_second_node()

    def check_loopback(self) -> None:
        """Every node's address is 127.0.0.1 and no process of the cluster listens beyond loopback
        (an AssertionError, not a skip: the tests' traffic must stay on this machine)."""
        addresses = {node["node_id"]: node.get("node_ip") for node in self.alive()}
        assert len(addresses) == 2 and set(addresses.values()) == {LOOPBACK}, addresses
        assert_loopback_only([proc.pid for proc in (self.head, self.second) if proc is not None], "the Ray cluster")

    def start_second_node(self) -> None:
        self.second_starts += 1
        cmd = [
            sys.executable,
            str(RAY_LOOPBACK_NODE),
            "start",
            f"--address={self.address}",
            f"--resources={json.dumps({self.second_node_resource: 1})}",
            *self._node_args(self.root / f"n{self.second_starts}"),
        ]
        self.second = _start(cmd, self.root / f"second.{self.second_starts}.out", self._env(), self.root)
        self._wait(self.second_node_alive, "the second Ray node did not join", [self.head, self.second])
        self.check_loopback()

    def kill_second_node(self, wait_s: float = STARTUP_TIMEOUT_S) -> None:
        """SIGKILL the second node's whole process group (its raylet, agents and task workers),
        as a machine that loses power, and wait until the head sees the node dead."""
        if self.second is not None:
            try:
                os.killpg(self.second.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.second.wait(timeout=10)
        deadline = Deadline(wait_s)
        while self.second_node_alive():
            if deadline.passed():
                raise AssertionError(f"Ray still lists the killed second node alive after {deadline.limit():.0f}s")
            time.sleep(0.3)

    def _wait(self, ready, what: str, procs: list[subprocess.Popen | None]) -> None:
        deadline = Deadline(STARTUP_TIMEOUT_S)
        while not deadline.passed():
            if any(proc is None or proc.poll() is not None for proc in procs):
                raise ClusterUnavailable(f"`ray start` exited:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.5)
        raise ClusterUnavailable(f"{what} within {deadline.limit():.0f}s:\n{self.logs()}")

    def stop(self) -> None:
        _stop_group(self.second, wait_s=3)
        _stop_group(self.head, wait_s=3)
        self.second = self.head = None
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_daemons():
    """A two-node Ray cluster on loopback for the session (skips with the reason when it cannot start).

    For the rest of this test process, a Ray call without a connected driver (a run a failed test
    left behind, after its cluster went) fails instead of starting a local cluster of its own,
    which would write a token into the user's ~/.ray and switch their later clusters to token auth."""
    try:
        from ray._private import auto_init_hook

        auto_init_hook.enable_auto_connect = False
    except ImportError:
        pass  # start() says Ray is missing
    cluster = RayCluster(Path(tempfile.mkdtemp(prefix="hray-")))
    try:
        cluster.start()
    except (ClusterUnavailable, OSError, subprocess.SubprocessError) as exc:
        cluster.stop()
        pytest.skip(f"no local Ray cluster: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture
def ray_cluster(ray_daemons, monkeypatch):
    """The session's Ray cluster with both nodes alive (a second node killed by an earlier test
    is started again) and ``RAY_ADDRESS`` in this test's environment."""
    if not ray_daemons.second_node_alive():
        try:
            ray_daemons.start_second_node()
        except ClusterUnavailable as exc:
            pytest.skip(f"the second Ray node did not come back: {exc}")
    for name, value in ray_daemons.env.items():
        monkeypatch.setenv(name, value)
    # Ray read the variable when this process imported it: the driver keeps 127.0.0.1 as well
    from ray._private import ray_constants

    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    return ray_daemons
