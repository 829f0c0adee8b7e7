"""The tokenizer of the model in use: what budgets count tokens with.

:func:`counter_for` turns an endpoint's settings (``tokenizer``, ``tokenizer_model``,
``token_encoding``, ``model``) into a counter with a ``name`` the prompt inspector shows:

- ``endpoint``: the server's own tokenize route, exact for the model it runs. llama.cpp
  (``POST /tokenize`` ``{content}``), vLLM (``POST /tokenize`` ``{model, prompt}``) and
  KoboldCpp (``POST /api/extra/tokencount`` ``{prompt}``) are probed once per endpoint
  and model, at the server root (the base URL without ``/v1``). A route found is kept
  until it answers wrongly (another backend now runs on that port): then the server is
  probed again. "No route" is kept for ``NO_ROUTE_RECHECK_S``. A server without one, or
  one that stops answering, falls back to what ``auto`` would pick without it.
- ``llama``: SillyTavern's default tokenizer, LLaMA 1/2 (32,000 pieces): the bundled
  vocabulary (:mod:`storyloom.llm.llama_tokenizer`, data from ``llama-tokenizer-js``
  built by ``make setup``), or a SentencePiece model file named by ``tokenizer_model``
  (read with the ``sentencepiece`` package), which wins when it is set and readable.
  Without either, counting falls back to an OpenAI encoding and the name says so.
- ``openai``: the bundled OpenAI encodings (:mod:`storyloom.llm.tokens`).
- ``auto`` (default): the endpoint's route when it has one; else the OpenAI encoding for
  OpenAI models (or when ``token_encoding`` is set); else ``llama``, as SillyTavern's
  "best match" picks LLaMA for a model it cannot place; else an OpenAI encoding.

Counting may block on HTTP: call it from worker threads, as budgets already do. Each
counter keeps the counts it made.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx

from storyloom.llm.llama_tokenizer import bundled_llama_counter
from storyloom.llm.tokens import MessageCounting, TokenCounter, token_counter

__all__ = [
    "EndpointCounter",
    "SentencePieceCounter",
    "TokenizerChoice",
    "counter_for",
    "forget_probes",
    "is_openai_model",
    "probe_tokenize_route",
]

TokenizerChoice = Literal["auto", "llama", "openai", "endpoint"]
Route = Literal["llama.cpp", "vllm", "koboldcpp"]

PROBE_TIMEOUT_S = 3.0
COUNT_TIMEOUT_S = 10.0
# A server found without a route is asked again after this long: it may have been
# restarted as a backend that has one.
NO_ROUTE_RECHECK_S = 60.0
_CACHE_ENTRIES = 20_000


class EndpointSettings(Protocol):
    """What :func:`counter_for` reads of an endpoint (``ChatEndpoint`` has it all)."""

    base_url: str
    model: str
    token_encoding: str | None
    tokenizer: TokenizerChoice
    tokenizer_model: str | None

    @property
    def api_key(self) -> Any: ...


class SentencePieceCounter(MessageCounting):
    """Counts with a SentencePiece model file, as SillyTavern's LLaMA tokenizer does
    (its ids without the BOS token)."""

    def __init__(self, model_file: Path, name: str = "llama") -> None:
        import sentencepiece

        self.model_file = model_file
        self._name = f"{name} ({model_file.name})"
        self._processor: Any = sentencepiece.SentencePieceProcessor(model_file=str(model_file))
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        if not text:
            return 0
        known = self._counts.get(text)
        if known is None:
            with self._lock:  # the processor is not documented as thread-safe
                known = len(self._processor.encode(text))
            if len(self._counts) >= _CACHE_ENTRIES:
                self._counts.clear()
            self._counts[text] = known
        return known

    def encode(self, text: str) -> list[int]:
        with self._lock:
            ids: list[int] = self._processor.encode(text)
        return ids

    def decode(self, tokens: Sequence[int]) -> str:
        with self._lock:
            text: str = self._processor.decode(list(tokens))
        return text


@functools.cache
def _sentencepiece(path: str) -> SentencePieceCounter:
    return SentencePieceCounter(Path(path))


def server_root(base_url: str) -> str:
    """The server's root: the base URL without ``/v1`` (where its own routes are)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def bearer_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _request(route: Route, model: str, text: str) -> tuple[str, dict[str, Any]]:
    if route == "koboldcpp":
        return "/api/extra/tokencount", {"prompt": text}
    if route == "vllm":
        return "/tokenize", {"model": model, "prompt": text}
    return "/tokenize", {"content": text}


def _answer_count(route: Route, data: Any) -> int:
    """The token count in a tokenize answer; ValueError when it has none."""
    if isinstance(data, dict):
        if route == "koboldcpp" and isinstance(data.get("value"), int):
            return int(data["value"])
        if route == "vllm" and isinstance(data.get("count"), int):
            return int(data["count"])
        tokens = data.get("tokens")
        if route != "koboldcpp" and isinstance(tokens, list):
            return len(tokens)
    raise ValueError(f"not a {route} tokenize answer")


def _ask(client: httpx.Client, root: str, route: Route, model: str, text: str) -> int:
    path, body = _request(route, model, text)
    response = client.post(root + path, json=body)
    response.raise_for_status()
    return _answer_count(route, response.json())


_PROBES: dict[tuple[str, str], tuple[Route | None, float]] = {}
_PROBE_LOCK = threading.Lock()


def forget_probes() -> None:
    """Forget every server's probed route and every counter built on one: the next
    count asks again (settings were saved; another backend may serve that port)."""
    with _PROBE_LOCK:
        _PROBES.clear()
    with _COUNTERS_LOCK:
        _COUNTERS.clear()


def probe_tokenize_route(
    base_url: str, model: str, api_key: str | None = None, *, refresh: bool = False
) -> Route | None:
    """Which tokenize route the server at ``base_url`` answers, or None; once per
    (server, model) unless ``refresh`` (None only for ``NO_ROUTE_RECHECK_S``)."""
    root = server_root(base_url)
    key = (root, model)
    with _PROBE_LOCK:
        known = _PROBES.get(key)
    if known is not None and not refresh:
        kept, when = known
        if kept is not None or time.monotonic() - when < NO_ROUTE_RECHECK_S:
            return kept
    found: Route | None = None
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT_S, headers=bearer_headers(api_key)) as client:
            # KoboldCpp first: its route is its own; llama.cpp and vLLM share /tokenize
            # and differ in the body they take.
            for route in ("koboldcpp", "llama.cpp", "vllm"):
                try:
                    _ask(client, root, route, model, "Hello, world")
                except (httpx.HTTPError, ValueError):
                    continue
                found = route
                break
    except httpx.HTTPError:
        found = None
    with _PROBE_LOCK:
        _PROBES[key] = (found, time.monotonic())
    return found


class EndpointCounter(MessageCounting):
    """Counts with the endpoint's tokenize route; ``fallback`` where it has none or fails.

    The route is probed on the first count (off the event loop, where counting runs),
    and again when it answers as no tokenize route does: the port now serves another
    backend.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        fallback: MessageCounting,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.fallback = fallback
        self._api_key = api_key
        self._route: Route | None = None
        self._resolved_at: float | None = None
        self._client: httpx.Client | None = None
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def route(self) -> Route | None:
        """The endpoint's tokenize route, probing it the first time."""
        if self._due():
            with self._lock:
                if self._due():
                    self._reprobe(refresh=False)
        return self._route

    def _due(self) -> bool:
        if self._resolved_at is None:
            return True
        return self._route is None and time.monotonic() - self._resolved_at >= NO_ROUTE_RECHECK_S

    def _reprobe(self, *, refresh: bool) -> None:
        route = probe_tokenize_route(self.base_url, self.model, self._api_key, refresh=refresh)
        if route != self._route:
            self._counts.clear()  # counted by another tokenizer
        self._route = route
        self._resolved_at = time.monotonic()

    @property
    def name(self) -> str:
        route = self.route
        if route is None:
            return self.fallback.name
        return f"endpoint ({route} tokenize route)"

    def count(self, text: str) -> int:
        if not text:
            return 0
        known = self._counts.get(text)
        if known is not None:
            return known
        route = self.route
        if route is None:
            return self.fallback.count(text)
        try:
            count = self._ask_route(route, text)
        except httpx.RequestError:
            # A server that stopped answering must not stop the chat: count this text the
            # fallback way, and ask again next time.
            return self.fallback.count(text)
        except (httpx.HTTPStatusError, ValueError):
            # It answered, but not as this route does: ask which route it has now, once.
            with self._lock:
                self._reprobe(refresh=True)
            now = self._route
            if now is None or now == route:
                return self.fallback.count(text)
            try:
                count = self._ask_route(now, text)
            except (httpx.HTTPError, ValueError):
                return self.fallback.count(text)
        if len(self._counts) >= _CACHE_ENTRIES:
            self._counts.clear()
        self._counts[text] = count
        return count

    def _ask_route(self, route: Route, text: str) -> int:
        return _ask(self._http(), server_root(self.base_url), route, self.model, text)

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(
                timeout=COUNT_TIMEOUT_S, headers=bearer_headers(self._api_key)
            )
        return self._client


class _Labelled(MessageCounting):
    """Another counter under a name that says why it was chosen."""

    def __init__(self, inner: MessageCounting, name: str) -> None:
        self.inner = inner
        self._name = name

    def count(self, text: str) -> int:
        return self.inner.count(text)


def is_openai_model(model: str) -> bool:
    """Whether the bundled OpenAI encodings know ``model`` (gpt-*, o1, o3...)."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return name.startswith(("gpt-", "chatgpt", "text-embedding", "davinci", "o1", "o3", "o4"))


_COUNTERS: dict[tuple[Any, ...], MessageCounting] = {}
_COUNTERS_LOCK = threading.Lock()


def api_key_of(endpoint: Any) -> str | None:
    """The endpoint's API key in clear (None: it has none)."""
    secret = endpoint.api_key
    value = secret.get_secret_value() if hasattr(secret, "get_secret_value") else secret
    return value or None


def counter_for(endpoint: EndpointSettings) -> MessageCounting:
    """The counter budgets use for ``endpoint`` (cached while its settings are the same)."""
    api_key = api_key_of(endpoint)
    key = (
        endpoint.tokenizer,
        endpoint.base_url,
        endpoint.model,
        endpoint.token_encoding,
        endpoint.tokenizer_model,
        api_key,
    )
    with _COUNTERS_LOCK:
        counter = _COUNTERS.get(key)
    if counter is None:
        counter = _choose(endpoint, api_key or None)
        with _COUNTERS_LOCK:
            counter = _COUNTERS.setdefault(key, counter)
    return counter


def _choose(endpoint: EndpointSettings, api_key: str | None) -> MessageCounting:
    openai: TokenCounter = token_counter(endpoint.model, endpoint.token_encoding)
    choice = endpoint.tokenizer
    openai_model = bool(endpoint.token_encoding) or is_openai_model(endpoint.model)
    if choice == "openai" or (choice == "auto" and openai_model):
        return openai
    if choice == "llama":
        llama = _llama(endpoint.tokenizer_model)
        if isinstance(llama, MessageCounting):
            return llama
        return _Labelled(openai, f"{openai.name} (llama chosen: {llama})")
    # auto and endpoint: the route first; what auto picks without it is the fallback:
    # LLaMA for a model that is not OpenAI's, as SillyTavern's "best match" does.
    fallback: MessageCounting = openai
    if not openai_model:
        llama = _llama(endpoint.tokenizer_model)
        fallback = (
            llama
            if isinstance(llama, MessageCounting)
            else _Labelled(openai, f"{openai.name} (no llama: {llama})")
        )
    if not endpoint.base_url:
        return fallback
    return EndpointCounter(endpoint.base_url, endpoint.model, api_key, fallback)


def _llama(model_file: str | None) -> MessageCounting | str:
    """The LLaMA counter (the user's SentencePiece file when set and readable, else the
    bundled vocabulary), or why there is none."""
    problem = None
    if model_file:
        path = Path(model_file).expanduser()
        if not path.is_file():
            problem = f"tokenizer_model {path} is not a file"
        else:
            try:
                return _sentencepiece(str(path.resolve()))
            except (OSError, RuntimeError) as exc:
                problem = f"tokenizer_model {path} is not a SentencePiece model ({exc})"
    try:
        bundled = bundled_llama_counter()
    except (OSError, ValueError) as exc:
        missing = f"the bundled LLaMA vocabulary is unreadable ({exc}); run make setup"
        return f"{problem}; {missing}" if problem else missing
    return _Labelled(bundled, f"{bundled.name}; {problem}") if problem else bundled
