"""The real schedulers the executor tests run on: a Slurm job submitted through submitit runs and
returns its result, a Ray task asking for the second node's resource runs there, and killing that
node kills its task's worker and makes Ray see the node dead."""

from __future__ import annotations

import os
import time

import pytest
from executors_helpers import pid_alive, wait_for
from slowness import slowness


def test_slurm_runs_a_submitit_job(slurm_cluster, tmp_path):
    submitit = pytest.importorskip("submitit")

    def inside_slurm(x: int) -> tuple[int, str, str]:
        return x * x, os.environ["SLURM_JOB_ID"], os.environ["SLURM_JOB_PARTITION"]

    executor = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="slurm")
    executor.update_parameters(timeout_min=10, cpus_per_task=1, slurm_partition=slurm_cluster.partition)
    job = executor.submit(inside_slurm, 7)
    wait_for(job.done, 60, f"job {job.job_id}'s end")
    assert job.result() == (49, job.job_id, slurm_cluster.partition)
    # the result file is written before the job step ends: Slurm may list the job as RUNNING a moment longer
    wait_for(lambda: slurm_cluster.jobs().get(job.job_id, "COMPLETED") != "RUNNING", 60, "the job step's end")
    assert slurm_cluster.jobs().get(job.job_id, "COMPLETED") == "COMPLETED"


def test_slurm_fixture_cancels_what_a_test_left(slurm_cluster, tmp_path):
    out = slurm_cluster.run("sbatch", "--parsable", f"--output={tmp_path / 'sleep.out'}", "--wrap", "sleep 300")
    job_id = out.stdout.strip().split(";")[0]
    assert out.returncode == 0, out.stderr
    assert job_id in slurm_cluster.jobs()
    slurm_cluster.cancel_all()
    assert slurm_cluster.jobs().get(job_id, "CANCELLED") == "CANCELLED"
    assert slurm_cluster.node_state() == "idle"


def _written(path) -> str:
    wait_for(lambda: path.exists() and path.read_text(), 30, f"{path} to be written")
    return path.read_text()


@pytest.mark.slow  # starting the two nodes takes about 15 s on two cores
def test_ray_runs_on_the_second_node_and_sees_it_killed(ray_cluster, tmp_path):
    ray = pytest.importorskip("ray")
    resource = ray_cluster.second_node_resource
    second = [n for n in ray_cluster.alive() if resource in n["resources_total"]]
    assert len(ray_cluster.alive()) == 2 and len(second) == 1
    pid_file = tmp_path / "worker.pid"
    ray.init(address=ray_cluster.address, logging_level="ERROR", log_to_driver=False)
    try:
        assert {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]} == {"127.0.0.1"}

        @ray.remote(num_cpus=1, resources={resource: 1}, max_retries=0)
        def node_of_this_task() -> str:
            return ray.get_runtime_context().get_node_id()

        @ray.remote(num_cpus=1, resources={resource: 1}, max_retries=0)
        def hold(path: str) -> None:
            with open(path, "w") as out:
                out.write(str(os.getpid()))
            time.sleep(300)

        assert ray.get(node_of_this_task.remote(), timeout=60 * slowness()) == second[0]["node_id"]
        held = hold.remote(str(pid_file))
        worker_pid = int(_written(pid_file))
        ray_cluster.kill_second_node()
        assert not ray_cluster.second_node_alive()
        assert not pid_alive(worker_pid)
        with pytest.raises(ray.exceptions.RayError):
            ray.get(held, timeout=60 * slowness())
    finally:
        ray.shutdown()
