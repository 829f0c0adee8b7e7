"""Chat completions against any OpenAI-compatible endpoint, streamed or whole.

The openai SDK builds and sends requests (auth headers, base URL joining, status-code
errors); the streamed body is read here, straight from the HTTP response. The SDK's own
stream turns every chunk into a pydantic object, which costs about seven times the
network time on a 2,000-chunk reply; reading the SSE lines and ``json.loads`` each chunk
keeps the hot path as lean as a bare httpx loop (see ``bench/llm_stream.py``).

Retries happen only before the first token: once text has reached the caller, a failure
raises :class:`~storyloom.llm.errors.LLMError` ``stream_cut`` carrying the partial text.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import openai

from storyloom.core.settings import ChatEndpoint, ModelParameters
from storyloom.llm.answer_stream import AnswerStream, ChatResult
from storyloom.llm.endpoint_client import EndpointClient, request_parameters
from storyloom.llm.errors import LLMError
from storyloom.llm.instruct import TextPrompt, messages_prompt
from storyloom.llm.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from storyloom.llm.text_completion import TextCompletionClient, TextStream, text_api_refusal
from storyloom.llm.think_split import ThinkTags, split_think, think_tags

__all__ = ["ChatClient", "ChatResult", "ChatStream"]

# Request fields this module sets itself; parameters and overrides cannot replace them.
_RESERVED = frozenset({"model", "messages", "stream", "extra_body"})

# Parameters the SDK's ``create()`` knows by name; everything else goes in ``extra_body``.
_TYPED_PARAMETERS = frozenset(ModelParameters.model_fields) | {
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "n",
    "parallel_tool_calls",
    "reasoning_effort",
    "response_format",
    "stream_options",
    "tool_choice",
    "tools",
    "top_logprobs",
    "user",
}


class ChatClient(EndpointClient):
    """A client for one :class:`~storyloom.core.settings.ChatEndpoint`.

    Build it freely; an unconfigured endpoint (no base URL or model) raises
    ``LLMError(kind="not_configured")`` on first use, not here. Use as
    ``async with ChatClient(endpoint) as client:`` or call :meth:`aclose`.

    On a text-completion connection (``endpoint.api`` other than ``chat``) the same
    calls format the messages with the endpoint's instruct and context templates
    (:func:`~storyloom.llm.instruct.messages_prompt`) and send the prompt through a
    :class:`~storyloom.llm.text_completion.TextCompletionClient`, so every caller works
    on either kind unchanged; tool calls need a chat connection.
    """

    def __init__(
        self, endpoint: ChatEndpoint, *, retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY
    ) -> None:
        super().__init__(endpoint, retry_policy=retry_policy)
        self._text: TextCompletionClient | None = None

    async def aclose(self) -> None:
        """Close pooled connections. Streams still open are closed with them."""
        text, self._text = self._text, None
        if text is not None:
            await text.aclose()
        await super().aclose()

    # -- public calls -----------------------------------------------------------------

    def stream(self, messages: list[dict[str, Any]], **overrides: Any) -> AnswerStream:
        """Start a streamed completion; iterate the result for text deltas.

        ``overrides`` replace the endpoint's parameters for this call (``None`` removes
        one); ``model=`` picks another model. Nothing is sent until iteration starts.
        """
        if self.endpoint.api != "chat":
            return self.stream_prompt(messages_prompt(messages, self.endpoint), **overrides)
        return ChatStream(self, self._request(messages, overrides, stream=True))

    def stream_prompt(self, prompt: TextPrompt, **overrides: Any) -> TextStream:
        """Stream the continuation of a prompt built with the endpoint's templates (its
        stop strings join the caller's). Needs a text-completion ``api``."""
        text = self._text_client()
        if overrides.get("tools"):
            return TextStream(text, {}, refusal=text_api_refusal(self.endpoint))
        return text.stream(prompt.text, **self._text_overrides(prompt, overrides))

    async def complete(self, messages: list[dict[str, Any]], **overrides: Any) -> ChatResult:
        """A whole (non-streamed) completion, retried on 429/5xx/connection errors."""
        if self.endpoint.api != "chat":
            if overrides.get("tools"):
                raise text_api_refusal(self.endpoint)
            prompt = messages_prompt(messages, self.endpoint)
            return await self._text_client().complete(
                prompt.text, **self._text_overrides(prompt, overrides)
            )
        request = self._request(messages, overrides, stream=False)
        client = self._sdk()

        async def attempt() -> ChatResult:
            async with client.chat.completions.with_streaming_response.create(
                **request
            ) as response:
                data = await response.json()
            return _result_from_completion(data, think_tags(self.endpoint))

        return await self._with_retries(attempt, request.get("model"))

    async def list_models(self) -> list[str]:
        """Model names the endpoint lists at ``GET /models``."""
        client = self._sdk()

        async def attempt() -> list[str]:
            async with client.models.with_streaming_response.list() as response:
                data = await response.json()
            return _model_names(data)

        return await self._with_retries(attempt, None)

    # -- internals --------------------------------------------------------------------

    def _text_client(self) -> TextCompletionClient:
        if self.endpoint.api == "chat":
            raise LLMError(
                f"{self.endpoint.base_url or 'This connection'} is a chat-completion "
                "connection; a text prompt needs its API set to text, llamacpp or koboldcpp.",
                kind="bad_request",
            )
        if self._text is None:
            self._text = TextCompletionClient(self.endpoint, retry_policy=self.retry_policy)
        return self._text

    def _text_overrides(self, prompt: TextPrompt, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """``overrides`` with the template's stop strings before the caller's."""
        merged = dict(overrides)
        merged.pop("tools", None)
        caller = overrides.get("stop", self.endpoint.parameters.stop)
        if isinstance(caller, str):
            caller = [caller]
        stop: list[str] = []
        for item in [*prompt.stop, *(caller or [])]:
            if item and item not in stop:
                stop.append(item)
        merged["stop"] = stop or None
        return merged

    def _request(
        self, messages: list[dict[str, Any]], overrides: Mapping[str, Any], *, stream: bool
    ) -> dict[str, Any]:
        """Keyword arguments for ``chat.completions.create``."""
        if stream:
            # Asked for by default; ``stream_options=None`` drops it for a server that
            # rejects the field.
            overrides = {"stream_options": {"include_usage": True}, **overrides}
        parameters = request_parameters(self.endpoint, overrides, _RESERVED)
        model = overrides.get("model") or self.endpoint.model
        # The messages travel in ``extra_body``, which the SDK merges into the JSON body
        # as is. Given as ``messages=``, the SDK walks every message through its typed-dict
        # transform first: about 0.2 ms a message here, 100 ms for a long chat's prompt.
        request: dict[str, Any] = {"model": model, "messages": [], "stream": stream}
        extra = {k: v for k, v in parameters.items() if k not in _TYPED_PARAMETERS}
        request.update((k, v) for k, v in parameters.items() if k in _TYPED_PARAMETERS)
        request["extra_body"] = {**extra, "messages": messages}
        return request


class ChatStream(AnswerStream):
    """A streamed chat completion (see :class:`~storyloom.llm.answer_stream.AnswerStream`);
    ``tool_calls`` fill in as their deltas arrive."""

    def __init__(self, client: ChatClient, request: dict[str, Any]) -> None:
        super().__init__(client, request["model"])
        self._request = request
        self._tool_calls: dict[int, dict[str, Any]] = {}

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Tool calls in OpenAI message format, merged from their deltas."""
        return [self._tool_calls[i] for i in sorted(self._tool_calls)]

    def _start(self, sdk: openai.AsyncOpenAI) -> AbstractAsyncContextManager[Any]:
        return sdk.chat.completions.with_streaming_response.create(**self._request)

    def _touched(self) -> bool:
        return bool(self._parts or self._tool_calls)

    def _apply(self, chunk: Any) -> str | None:
        """Fold one chunk into the accumulated state; return its content delta."""
        if not isinstance(chunk, dict):
            return None
        if chunk.get("error"):
            raise self._stream_error(chunk["error"])
        if self.model is None:
            self.model = chunk.get("model")
        usage = chunk.get("usage")
        if usage:
            self.usage = usage
        choices = chunk.get("choices")
        if not choices:
            return None
        choice = choices[0]
        finish = choice.get("finish_reason")
        if finish:
            self.finish_reason = finish
        delta = choice.get("delta")
        if not delta:
            return None
        if len(delta) > 1 or "content" not in delta:
            self._apply_extras(delta)
        content: str | None = delta.get("content")
        if content and not self._think.done:
            return self._think.feed(content) or None
        return content

    def _apply_extras(self, delta: dict[str, Any]) -> None:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
        for call in delta.get("tool_calls") or ():
            index = call.get("index")
            if index is None:
                fresh = call.get("id") or not self._tool_calls
                index = len(self._tool_calls) if fresh else max(self._tool_calls)
            entry = self._tool_calls.setdefault(
                index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
            )
            if call.get("id"):
                entry["id"] = call["id"]
            function = call.get("function") or {}
            if function.get("name") and not entry["function"]["name"]:
                entry["function"]["name"] = function["name"]
            if function.get("arguments"):
                entry["function"]["arguments"] += function["arguments"]


def _result_from_completion(data: Any, tags: ThinkTags) -> ChatResult:
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise ValueError("the answer has no 'choices' list")
    choice = data["choices"][0] if data["choices"] else {}
    message = choice.get("message") or {}
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    thought, text = split_think(message.get("content") or "", tags)
    return ChatResult(
        text=text,
        finish_reason=choice.get("finish_reason"),
        usage=data.get("usage"),
        model=data.get("model"),
        tool_calls=list(message.get("tool_calls") or []),
        reasoning_text=(reasoning if isinstance(reasoning, str) else "") + thought,
    )


def _model_names(data: Any) -> list[str]:
    """Names from ``{"data": [{"id": ...}]}``, or Ollama-style ``{"models": [{"name": ...}]}``."""
    items: Any = []
    if isinstance(data, dict):
        items = data.get("data") or data.get("models") or []
    elif isinstance(data, list):
        items = data
    names: list[str] = []
    for item in items:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, dict):
            name = item.get("id") or item.get("name") or item.get("model")
            if isinstance(name, str):
                names.append(name)
    return names
