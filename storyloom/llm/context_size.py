"""The context size the model's server really has.

A budget made for 8,192 tokens sent to a llama.cpp server started with ``-c 2048`` is
refused ("request exceeds the available context size"). So budgets ask the server, at its
root (the base URL without ``/v1``), once per server and model for the process:

- llama.cpp: ``GET /props`` → ``default_generation_settings.n_ctx`` (or ``n_ctx``), and
  ``GET /v1/models`` → ``data[].meta.n_ctx``;
- KoboldCpp: ``GET /api/extra/true_max_context_length`` → ``value``;
- vLLM: ``GET /v1/models`` → ``data[].max_model_len``;
- Ollama: ``POST /api/show`` → ``parameters`` ``num_ctx``, else
  ``model_info.<arch>.context_length``.

:func:`context_size_of` is what a budget uses: the smaller of the server's size and the
endpoint's ``context_window`` setting (or a preset's own size) when both are known (a
user may want less, never more than the server holds), else whichever is known, else
:data:`~storyloom.core.settings.DEFAULT_CONTEXT_WINDOW`. It may block on HTTP: call it
from a worker thread, as budgets do.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import httpx

from storyloom.core.settings import DEFAULT_CONTEXT_WINDOW, ChatEndpoint
from storyloom.llm.tokenizers import api_key_of, bearer_headers, server_root

PROBE_TIMEOUT_S = 3.0

_SIZES: dict[tuple[str, str], int | None] = {}
_LOCK = threading.Lock()


def _positive(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, str) and value.strip().isdigit() and int(value) > 0:
        return int(value)
    return None


def _from_props(data: Any) -> int | None:
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    if isinstance(settings, dict) and _positive(settings.get("n_ctx")):
        return _positive(settings.get("n_ctx"))
    return _positive(data.get("n_ctx"))


def _from_models(data: Any, model: str) -> int | None:
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    sizes: list[tuple[bool, int]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        meta = item.get("meta")
        size = _positive(item.get("max_model_len")) or (
            _positive(meta.get("n_ctx")) if isinstance(meta, dict) else None
        )
        if size is not None:
            names = {item.get("id"), *(item.get("aliases") or [])}
            sizes.append((model in names, size))
    if not sizes:
        return None
    named = [size for matches, size in sizes if matches]
    # One model served (llama.cpp, most vLLM setups): its size, whatever it is called.
    return named[0] if named else (sizes[0][1] if len(sizes) == 1 else None)


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)", re.MULTILINE)


def _from_ollama(data: Any) -> int | None:
    if not isinstance(data, dict):
        return None
    parameters = data.get("parameters")
    if isinstance(parameters, str):
        found = _NUM_CTX.search(parameters)
        if found:
            return int(found.group(1))
    info = data.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if key.endswith(".context_length") and _positive(value):
                return _positive(value)
    return None


def forget_probes() -> None:
    """Forget every server's probed context size: the next turn asks again."""
    with _LOCK:
        _SIZES.clear()


def probe_context_size(
    base_url: str, model: str, api_key: str | None = None, *, refresh: bool = False
) -> int | None:
    """The context size the server at ``base_url`` says ``model`` has, or None when it
    does not say (an OpenAI-style API); once per (server, model) unless ``refresh``."""
    root = server_root(base_url)
    key = (root, model)
    with _LOCK:
        if key in _SIZES and not refresh:
            return _SIZES[key]
    found: int | None = None
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT_S, headers=bearer_headers(api_key)) as client:
            found = _ask(client, root, model)
    except httpx.HTTPError:
        found = None
    with _LOCK:
        _SIZES[key] = found
    return found


def _ask(client: httpx.Client, root: str, model: str) -> int | None:
    asks: list[tuple[str, str, dict[str, Any] | None, Any]] = [
        ("GET", "/props", None, _from_props),
        ("GET", "/api/extra/true_max_context_length", None, lambda d: _positive(_value(d))),
        ("GET", "/v1/models", None, lambda d: _from_models(d, model)),
        ("POST", "/api/show", {"model": model}, _from_ollama),
    ]
    for method, path, body, read in asks:
        try:
            response = client.request(method, root + path, json=body)
            if response.status_code != 200:
                continue
            size = read(response.json())
        except (httpx.HTTPError, ValueError):
            continue
        if size is not None:
            return int(size)
    return None


def _value(data: Any) -> Any:
    return data.get("value") if isinstance(data, dict) else None


def served_context_size(endpoint: ChatEndpoint) -> int | None:
    """What the endpoint's server says its context size is (None: it does not say)."""
    if not endpoint.base_url:
        return None
    return probe_context_size(endpoint.base_url, endpoint.model, api_key_of(endpoint))


def context_size_of(endpoint: ChatEndpoint, wanted: int | None = None) -> int:
    """The context size a budget for ``endpoint`` works with (see the module docstring);
    ``wanted`` (a pipeline's or preset's own size) stands in for the endpoint's setting."""
    setting = wanted or endpoint.context_window
    served = served_context_size(endpoint)
    if served is not None and setting is not None:
        return min(served, setting)
    return served or setting or DEFAULT_CONTEXT_WINDOW
