"""The child process that runs one GGUF model on llama.cpp's own server (``xllamacpp``).

Started by :class:`storyloom.llm.local_model.LocalModelServer` as
``python -m storyloom.llm.local_model_process '<json>'``. It loads the model, serves
llama.cpp's OpenAI-compatible HTTP API on 127.0.0.1 (a port the system picks), prints one
JSON line (``{"url": ..., "n_ctx": ...}``, or ``{"error": ...}``) and then waits on its
standard input: when the parent closes it, or dies, the model stops with it. A model that
crashes llama.cpp takes down this process only, never the storyloom server.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _serve(config: dict[str, Any]) -> dict[str, Any]:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = config["path"]
    params.n_ctx = int(config["context_size"])
    params.n_batch = int(config["batch_size"])
    params.n_ubatch = min(int(config["batch_size"]), 512)
    params.n_gpu_layers = int(config["gpu_layers"])
    params.cpuparams.n_threads = int(config["threads"])
    params.cpuparams_batch.n_threads = int(config["threads"])
    params.n_parallel = 1
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    # llama.cpp's server keys its models by a set of names.
    params.model_alias = {config["alias"]}
    params.verbosity = -1
    params.warmup = False
    server = xllamacpp.Server(params)
    # Kept referenced for the life of the process: its threads serve the HTTP API.
    globals()["_server"] = server
    return {"url": str(server.listening_address), "n_ctx": params.n_ctx}


def main() -> None:
    config = json.loads(sys.argv[1])
    try:
        answer = _serve(config)
    except Exception as exc:  # the parent names the file and this reason
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    if "error" in answer:
        os._exit(3)
    sys.stdin.read()  # until the parent closes it (or dies)
    # Not a normal exit: llama.cpp's server threads would keep it waiting.
    os._exit(0)


if __name__ == "__main__":
    main()
