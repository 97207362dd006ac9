"""vLLM as a generation backend: a server in an environment of its own, on loopback, and a checked client.

vLLM pins a transformers older than the harness needs, so it never runs in the harness's
process: the harness starts ``python -m vllm.entrypoints.openai.api_server`` from the vLLM
environment's Python (``server.VllmServer``), or talks to a server the user already runs, and
speaks HTTP to it (``client.VllmClient``). Nothing here imports torch or vLLM, so ``validate``
and ``plan`` stay light.

The study's settings (the spec fields live in ``harness.engine.spec``):

- ``rollout.backend``: ``hf`` (in-process ``generate``, the default) or ``vllm``;
- ``rollout.vllm.python``: the vLLM environment's Python; unset, ``$HARNESS_VLLM_PYTHON``, else
  ``.venv-vllm/bin/python`` in the working folder or beside the harness checkout
  (``environment.vllm_python``); ``environment.check_vllm_environment`` refuses, in one line,
  one that is missing or lacks vLLM;
- ``rollout.vllm.url``: a server the user already runs (else ``$HARNESS_VLLM_URL``); its API key
  only ever from ``$HARNESS_VLLM_API_KEY`` (never a study field, argv, a log or a record);
- ``rollout.vllm.start_timeout_s`` (default 600) and ``rollout.vllm.request_timeout_s``
  (default 600): how long the server may take to answer ``/health`` after its start, and one
  request to answer.

Module map: ``errors`` (the typed failures a trial fails with), ``environment`` (where vLLM is),
``server`` (start, watch and stop one server), ``client`` (requests, and every answer checked
before it is believed), ``serving`` (a started or the user's server for a piece of work),
``evaluation`` (the held-out evaluation through a server, into the same records as ``hf``'s).
"""
