"""What every client of one chat endpoint shares: the SDK client, the "not set up" check,
error mapping and retries (chat completions in :mod:`.chat`, text completions in
:mod:`.text_completion`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import openai

from storyloom.core.settings import ChatEndpoint
from storyloom.llm.errors import LLMError, map_error
from storyloom.llm.openai_client import openai_client
from storyloom.llm.retry import DEFAULT_RETRY_POLICY, RetryPolicy, call_with_retries

T = TypeVar("T")


class EndpointClient:
    """The SDK client for one endpoint, built on first use; an unconfigured endpoint
    raises ``LLMError(kind="not_configured")`` then, never at construction."""

    def __init__(
        self, endpoint: ChatEndpoint, *, retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY
    ) -> None:
        self.endpoint = endpoint
        self.retry_policy = retry_policy
        self._client: openai.AsyncOpenAI | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close pooled connections. Streams still open are closed with them."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _sdk_base_url(self) -> str:
        """The URL the SDK's relative paths start from."""
        return self.endpoint.base_url

    def _sdk(self) -> openai.AsyncOpenAI:
        endpoint = self.endpoint
        if not endpoint.configured and endpoint.local_problem is not None:
            raise LLMError(
                f"The local model does not run: {endpoint.local_problem}. Fix it under "
                "Settings → Local model, or set a base URL instead.",
                kind="not_configured",
            )
        if not endpoint.configured:
            fields = [("base URL", endpoint.base_url)]
            if endpoint.needs_model:
                fields.append(("model", endpoint.model))
            missing = [name for name, value in fields if not value]
            verb = "are" if len(missing) > 1 else "is"
            raise LLMError(
                f"No chat model is set up: the {' and '.join(missing)} {verb} empty. "
                "Fill them in under Settings.",
                kind="not_configured",
            )
        if self._client is None:
            self._client = openai_client(
                self._sdk_base_url(),
                endpoint.api_key,
                endpoint.timeout_s,
                endpoint.connect_timeout_s,
            )
        return self._client

    def _map(
        self, exc: BaseException, model: str | None, *, streaming: bool = False, partial: str = ""
    ) -> LLMError:
        endpoint = self.endpoint
        return map_error(
            exc,
            base_url=endpoint.base_url,
            model=model or endpoint.model,
            timeout_s=endpoint.timeout_s,
            connect_timeout_s=endpoint.connect_timeout_s,
            streaming=streaming,
            partial_text=partial,
        )

    async def _with_retries(self, attempt: Callable[[], Awaitable[T]], model: str | None) -> T:
        return await call_with_retries(
            attempt,
            map_exception=lambda exc: self._map(exc, model),
            max_retries=self.endpoint.max_retries,
            policy=self.retry_policy,
        )


def request_parameters(
    endpoint: ChatEndpoint, overrides: Mapping[str, Any], reserved: Collection[str]
) -> dict[str, Any]:
    """The endpoint's parameters with ``overrides`` applied (``None`` removes one); the
    ``reserved`` fields the client sets itself are never taken from either (a stray
    "stream" in the settings' extra keys must not break the protocol), and an empty
    ``stop`` is not sent."""
    parameters: dict[str, Any] = endpoint.parameters.model_dump(exclude_none=True)
    for name in reserved:
        parameters.pop(name, None)
    for name, value in overrides.items():
        if name in reserved:
            continue
        if value is None:
            parameters.pop(name, None)
        else:
            parameters[name] = value
    if not parameters.get("stop"):
        parameters.pop("stop", None)
    return parameters
