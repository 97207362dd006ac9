"""Each new policy brought to the vLLM server after an optimiser step, and which one a request uses.

With LoRA the policy is its adapter: ``save_pretrained`` of the peft model writes the adapter
folder alone (a few MB), which the server loads at run time under a new name per version
(``<prefix>-v<version>``); requests then name the newest adapter. An adapter a request still
samples with stays loaded (and its folder on disk: the server may read it again after evicting
it) until that request ends; every other older one is unloaded and its folder deleted.

With full fine-tuning the policy is every weight: the step saves the model folder and the server
reloads its weights in place from it (``VllmClient.reload_weights``). A reload under a running
request would mix two policies in one completion, so requests and reloads take turns (AReaL
likewise pauses generation while it updates weights).

``serving()`` is how a request learns the policy version and the served name it samples with;
``publish`` returns the seconds the whole sync took (saving included): ``time/weight_sync_s``.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.engine.models import LoadedModel


def is_lora(lm: LoadedModel) -> bool:
    """Whether the policy trains a peft adapter (its ``save_pretrained`` writes the adapter only)."""
    return hasattr(lm.model, "peft_config")


class PolicySync:
    """The server's copy of the policy. ``client`` is a ``harness.engine.vllm.client.VllmClient``
    (or anything with its ``load_adapter``, ``unload_adapter`` and ``reload_weights``);
    ``folder`` holds the saved versions; ``served_model`` is the name the server serves the base
    model under (what full fine-tuning's requests name); ``prefix`` keeps adapter names of
    different trials apart on a shared server."""

    def __init__(self, client, folder: Path, *, lora: bool, served_model: str, prefix: str):
        self.client, self.folder, self.lora = client, Path(folder), lora
        self.served_model, self.prefix = served_model, prefix
        self.version: int | None = None
        self.name: str | None = None  # what requests name now
        self._state = threading.Lock()  # version, name and the adapters' bookkeeping
        self._turns = threading.Lock()  # full fine-tuning: requests and reloads take turns
        self._in_use: Counter[str] = Counter()
        self._loaded: list[str] = []  # adapters on the server, oldest first
        self._weights: Path | None = None  # full fine-tuning: the folder the server last reloaded

    @contextmanager
    def serving(self) -> Iterator[tuple[int, str]]:
        """The (version, served name) a request samples with, kept for as long as it runs."""
        if not self.lora:
            with self._turns:
                yield self._current()
            return
        with self._state:
            version, name = self._current()
            self._in_use[name] += 1
        try:
            yield version, name
        finally:
            with self._state:
                self._in_use[name] -= 1
            self._retire()

    def _current(self) -> tuple[int, str]:
        if self.version is None:
            raise RuntimeError("no policy was published to the server yet: publish(lm, 0) before sampling")
        return self.version, self.name

    def publish(self, lm: LoadedModel, version: int) -> float:
        """Save the policy after ``version`` steps and bring it to the server; the seconds taken."""
        clock = time.perf_counter()
        name = f"{self.prefix}-v{version}"
        path = self.folder / name
        lm.model.save_pretrained(path)
        if self.lora:
            self.client.load_adapter(name, str(path))
            with self._state:
                self.version, self.name = version, name
                self._loaded.append(name)
            self._retire()
        else:
            lm.tokenizer.save_pretrained(path)
            with self._turns:
                self.client.reload_weights(str(path))
                self.version, self.name = version, self.served_model
            if self._weights is not None:  # the server no longer reads the weights it held
                shutil.rmtree(self._weights, ignore_errors=True)
            self._weights = path
        return time.perf_counter() - clock

    def close(self) -> None:
        """Unload this trial's adapters (a server the user runs outlives the trial); full
        fine-tuning leaves the last weights in the server it reloaded."""
        if not self.lora:
            return
        with self._state:
            loaded, self._loaded, self.name = self._loaded, [], None
        for name in loaded:
            self.client.unload_adapter(name)

    def _retire(self) -> None:
        """Unload every adapter that is neither the newest nor in use, and delete its folder."""
        with self._state:
            retired = [n for n in self._loaded if n != self.name and not self._in_use[n]]
            self._loaded = [n for n in self._loaded if n not in retired]
        for name in retired:
            self.client.unload_adapter(name)
            shutil.rmtree(self.folder / name, ignore_errors=True)
