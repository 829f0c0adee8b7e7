"""Text completions: one prompt string in, its continuation out, on three wire formats.

Which one is the endpoint's ``api``:

- ``text``: OpenAI-compatible ``POST {base_url}/completions`` (vLLM, TabbyAPI,
  text-generation-webui, KoboldCpp, llama.cpp); SSE chunks ``choices[0].text`` ending in
  ``[DONE]``.
- ``llamacpp``: llama.cpp's own ``POST {root}/completion``; SSE events ``{"content", "stop",
  "stop_type", "timings", ...}``, the last with ``"stop": true``.
- ``koboldcpp``: KoboldCpp's ``POST {root}/api/v1/generate`` (whole) and
  ``POST {root}/api/extra/generate/stream`` (SSE ``event: message`` / ``data: {"token",
  "finish_reason"}``); stopping a stream also asks ``POST {root}/api/extra/abort`` with
  the request's ``genkey``, since KoboldCpp generates on after the client leaves.

``{root}`` is the base URL without a trailing ``/v1``. Sampling parameters are renamed
to what each backend calls them (``max_tokens`` → ``n_predict`` / ``max_length``,
``repetition_penalty`` → ``repeat_penalty`` / ``rep_pen``, ``stop`` → ``stop_sequence``
for KoboldCpp, ...); other keys go as they are. Streams, retries and errors behave as
chat completions do (:mod:`.answer_stream`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import openai
from openai._constants import RAW_RESPONSE_HEADER
from openai._response import AsyncResponseContextManager

from storyloom.core.settings import ChatEndpoint, CompletionApi
from storyloom.llm.answer_stream import AnswerStream, ChatResult
from storyloom.llm.endpoint_client import EndpointClient, request_parameters
from storyloom.llm.errors import LLMError
from storyloom.llm.think_split import ThinkTags, split_think, think_tags
from storyloom.llm.tokenizers import server_root

__all__ = ["TextCompletionClient", "TextStream", "text_api_refusal", "text_request_body"]

_ABORT_TIMEOUT_S = 2.0

# Set by this module; parameters and overrides cannot replace them.
_RESERVED = frozenset({"model", "prompt", "stream", "messages", "extra_body"})
# Chat-completion-only options that a text backend would refuse or misread.
_CHAT_ONLY = frozenset(
    {"tool_choice", "parallel_tool_calls", "reasoning_effort", "stream_options", "n", "user"}
)
# OpenAI names → llama.cpp /completion and KoboldCpp /api/v1/generate names.
_RENAMES: dict[CompletionApi, dict[str, str]] = {
    "llamacpp": {
        "max_tokens": "n_predict",
        "max_completion_tokens": "n_predict",
        "repetition_penalty": "repeat_penalty",
    },
    "koboldcpp": {
        "max_tokens": "max_length",
        "max_completion_tokens": "max_length",
        "repetition_penalty": "rep_pen",
        "stop": "stop_sequence",
        "seed": "sampler_seed",
        "typical_p": "typical",
    },
}
# Parameters a backend has no such setting for.
_UNKNOWN: dict[CompletionApi, frozenset[str]] = {
    "llamacpp": frozenset({"logprobs", "top_logprobs", "response_format"}),
    "koboldcpp": frozenset(
        {"frequency_penalty", "logprobs", "top_logprobs", "response_format", "logit_bias"}
    ),
}


def text_api_refusal(endpoint: ChatEndpoint) -> LLMError:
    """The error for agent tool use on a text-completion connection."""
    return LLMError(
        f"{endpoint.base_url} is set up as a text-completion connection ({endpoint.api}), "
        "which cannot call tools. Agent tool use needs a chat-completion connection: set "
        "the API to chat in Settings.",
        kind="bad_request",
    )


def _json_schema(response_format: Any) -> Any:
    """llama.cpp's ``json_schema`` for an OpenAI ``response_format``, or None."""
    if not isinstance(response_format, Mapping):
        return None
    if response_format.get("type") == "json_object":
        return {"type": "object"}
    spec = response_format.get("json_schema")
    if response_format.get("type") == "json_schema" and isinstance(spec, Mapping):
        return spec.get("schema", {})
    return None


def text_request_body(
    endpoint: ChatEndpoint, prompt: str, overrides: Mapping[str, Any], *, stream: bool
) -> dict[str, Any]:
    """The JSON body for ``endpoint.api``: the prompt and the endpoint's parameters with
    ``overrides`` (``None`` removes one), named as that backend names them."""
    api = endpoint.api
    parameters = request_parameters(endpoint, overrides, _RESERVED)
    for name in _CHAT_ONLY:
        parameters.pop(name, None)
    body: dict[str, Any] = {"prompt": prompt}
    match api:
        case "text" | "chat":
            body["model"] = overrides.get("model") or endpoint.model
            body["stream"] = stream
            if stream:
                body["stream_options"] = {"include_usage": True}
            body.update(parameters)
            return body
        case "llamacpp":
            schema = _json_schema(parameters.get("response_format"))
            if schema is not None:
                body["json_schema"] = schema
        case "koboldcpp":
            pass
    renames = _RENAMES[api]
    unknown = _UNKNOWN[api]
    for name, value in parameters.items():
        if name not in unknown:
            body[renames.get(name, name)] = value
    if api == "llamacpp":
        body["stream"] = stream
    return body


def _llamacpp_finish(event: Mapping[str, Any]) -> str | None:
    """OpenAI's finish reason for a llama.cpp answer that stopped."""
    if not event.get("stop"):
        return None
    stop_type = event.get("stop_type")
    if stop_type == "limit" or event.get("stopped_limit") or event.get("truncated"):
        return "length"
    return "stop"


def _token_usage(prompt: Any, completion: Any) -> dict[str, Any] | None:
    """OpenAI's ``usage`` from a backend's two token counts (None unless both are ints)."""
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _llamacpp_usage(event: Mapping[str, Any]) -> dict[str, Any] | None:
    return _token_usage(event.get("tokens_evaluated"), event.get("tokens_predicted"))


class TextCompletionClient(EndpointClient):
    """A text-completion client for one endpoint whose ``api`` is ``text``, ``llamacpp``
    or ``koboldcpp``. Built freely; an unconfigured endpoint raises ``not_configured``
    on first use. One client belongs to one event loop."""

    def _sdk_base_url(self) -> str:
        base = self.endpoint.base_url
        return base if self.endpoint.api in ("text", "chat") else server_root(base)

    def stream(self, prompt: str, **overrides: Any) -> TextStream:
        """Start a streamed completion of ``prompt``; iterate it for text deltas.

        ``overrides`` replace the endpoint's parameters for this call (``None`` removes
        one). Nothing is sent until iteration starts.
        """
        body = text_request_body(self.endpoint, prompt, overrides, stream=True)
        if self.endpoint.api == "koboldcpp":
            body["genkey"] = f"KCPP{secrets.randbelow(10**8):08d}"
        return TextStream(self, body)

    async def complete(self, prompt: str, **overrides: Any) -> ChatResult:
        """A whole (non-streamed) completion, retried on 429/5xx/connection errors."""
        body = text_request_body(self.endpoint, prompt, overrides, stream=False)
        sdk = self._sdk()
        path = _WHOLE_PATHS[self.endpoint.api]
        api = self.endpoint.api

        async def attempt() -> ChatResult:
            data = await sdk.post(path, cast_to=object, body=body)
            return _whole_result(api, data, think_tags(self.endpoint))

        return await self._with_retries(attempt, body.get("model"))


_WHOLE_PATHS: dict[CompletionApi, str] = {
    "chat": "/completions",
    "text": "/completions",
    "llamacpp": "/completion",
    "koboldcpp": "/api/v1/generate",
}
_STREAM_PATHS: dict[CompletionApi, str] = {
    **_WHOLE_PATHS,
    "koboldcpp": "/api/extra/generate/stream",
}


def _whole_result(api: CompletionApi, data: Any, tags: ThinkTags) -> ChatResult:
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    text: Any
    finish: str | None = None
    usage: dict[str, Any] | None = None
    model: Any = data.get("model")
    match api:
        case "text" | "chat":
            choices = data.get("choices")
            if not isinstance(choices, list):
                raise ValueError("the answer has no 'choices' list")
            choice = choices[0] if choices else {}
            text, finish, usage = choice.get("text"), choice.get("finish_reason"), data.get("usage")
        case "llamacpp":
            if "content" not in data:
                raise ValueError("the answer has no 'content'")
            text = data["content"]
            finish = _llamacpp_finish({"stop": True, **data})
            usage = _llamacpp_usage(data)
        case "koboldcpp":
            results = data.get("results")
            if not isinstance(results, list) or not results:
                raise ValueError("the answer has no 'results' list")
            first = results[0]
            text, finish = first.get("text"), first.get("finish_reason")
            usage = _token_usage(first.get("prompt_tokens"), first.get("completion_tokens"))
    thought, reply = split_think(text if isinstance(text, str) else "", tags)
    return ChatResult(
        text=reply,
        finish_reason=finish,
        usage=usage,
        model=model if isinstance(model, str) else None,
        reasoning_text=thought,
    )


class TextStream(AnswerStream):
    """A streamed text completion (see :class:`~storyloom.llm.answer_stream.AnswerStream`
    for ``text``, ``finish_reason``, ``usage``, ``aclose()``, ``stopped``...)."""

    def __init__(
        self, client: TextCompletionClient, body: dict[str, Any], refusal: LLMError | None = None
    ) -> None:
        super().__init__(client, str(body.get("model") or client.endpoint.model))
        self._body = body
        self._api = client.endpoint.api
        self._refusal = refusal
        self._sent = False

    def _start(self, sdk: openai.AsyncOpenAI) -> AbstractAsyncContextManager[Any]:
        if self._refusal is not None:
            raise self._refusal
        self._sent = True
        # The SDK's own streamed-response wrapper, around its generic post: the SDK
        # sends the request and raises status errors; the body is read by the caller.
        request = sdk.post(
            _STREAM_PATHS[self._api],
            cast_to=object,
            body=self._body,
            options={"headers": {RAW_RESPONSE_HEADER: "stream"}},
        )
        return AsyncResponseContextManager(request)

    def _apply(self, event: Any) -> str | None:
        if not isinstance(event, dict):
            return None
        if event.get("error"):
            raise self._stream_error(event["error"])
        content: Any
        match self._api:
            case "text" | "chat":
                if self.model is None:
                    self.model = event.get("model")
                if event.get("usage"):
                    self.usage = event["usage"]
                choices = event.get("choices")
                if not choices:
                    return None
                choice = choices[0]
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
                content = choice.get("text")
            case "llamacpp":
                if self.model is None and isinstance(event.get("model"), str):
                    self.model = event["model"]
                finish = _llamacpp_finish(event)
                if finish is not None:
                    self.finish_reason = finish
                    self.usage = _llamacpp_usage(event)
                content = event.get("content")
            case "koboldcpp":
                # Only the last event's finish reason is current: the earlier ones carry
                # whatever the previous generation ended with.
                self.finish_reason = event.get("finish_reason")
                content = event.get("token")
        if not isinstance(content, str) or not content:
            return None
        if not self._think.done:
            return self._think.feed(content) or None
        return content

    async def aclose(self) -> None:
        """Stop the stream; on KoboldCpp also ask the server to stop generating."""
        running = self._sent and not self.finished
        await super().aclose()
        if running and self._api == "koboldcpp":
            await self._abort()

    async def _abort(self) -> None:
        """``POST /api/extra/abort`` for this request's genkey; best effort, bounded."""
        client = self._client
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_ABORT_TIMEOUT_S):
                await client._sdk().post(
                    "/api/extra/abort", cast_to=object, body={"genkey": self._body["genkey"]}
                )
