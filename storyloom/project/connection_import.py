"""SillyTavern's connection profiles as storyloom connections (``connections`` in
settings.json).

A chat-completion profile (``mode`` ``cc``) becomes an ``api: chat`` connection; a
text-completion one (``tc``) becomes ``koboldcpp``, ``llamacpp`` or ``text`` (the
OpenAI-compatible ``/v1/completions`` of text-generation-webui, TabbyAPI, vLLM, Aphrodite,
Ollama...) by its ``api``, with its instruct and context template names. The server URL
comes from ``api-url``, else the address the API has by default (SillyTavern's own
defaults for local servers, the provider's for hosted ones), with ``/v1`` added where the
API is OpenAI-compatible. A profile whose API storyloom cannot talk to is reported with
the reason, and the others are still imported.

No API key comes over: SillyTavern keeps them in ``secrets.json``, which this never
reads; a connection that replaces one of the same name keeps that one's key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from storyloom.core.settings import (
    CONNECTION_NAME_MAX,
    ChatEndpoint,
    CompletionApi,
    Settings,
    check_connection_name,
)
from storyloom.sillytavern.connection_profiles import StConnectionProfile

KEYS_NOTE = (
    "No API keys were imported: SillyTavern keeps them in its secrets.json, which is not "
    "read. Set each connection's key in Settings → Connections."
)


@dataclass(frozen=True)
class _Api:
    api: CompletionApi
    default_url: str
    """The address when the profile has no api-url ('' none: the profile must have one)."""
    v1: bool
    """OpenAI-compatible: the base URL ends in /v1."""


_LOCAL_TEXT = {
    "ooba": "http://127.0.0.1:5000",
    "tabby": "http://127.0.0.1:5000",
    "vllm": "http://127.0.0.1:8000",
    "aphrodite": "http://127.0.0.1:2242",
    "ollama": "http://127.0.0.1:11434",
    "generic": "",
}
TEXT_APIS: dict[str, _Api] = {
    "koboldcpp": _Api("koboldcpp", "http://127.0.0.1:5001", v1=False),
    "kcpp": _Api("koboldcpp", "http://127.0.0.1:5001", v1=False),
    "llamacpp": _Api("llamacpp", "http://127.0.0.1:8080", v1=False),
    **{name: _Api("text", url, v1=True) for name, url in _LOCAL_TEXT.items()},
    "openrouter": _Api("text", "https://openrouter.ai/api/v1", v1=True),
    "openrouter-text": _Api("text", "https://openrouter.ai/api/v1", v1=True),
    "featherless": _Api("text", "https://api.featherless.ai/v1", v1=True),
    "togetherai": _Api("text", "https://api.together.xyz/v1", v1=True),
    "infermaticai": _Api("text", "https://api.totalgpt.ai/v1", v1=True),
}
"""SillyTavern's text completion types storyloom talks to (``mode`` tc)."""

CHAT_APIS: dict[str, _Api] = {
    "openai": _Api("chat", "https://api.openai.com/v1", v1=False),
    "custom": _Api("chat", "", v1=False),
    "openrouter": _Api("chat", "https://openrouter.ai/api/v1", v1=False),
    "deepseek": _Api("chat", "https://api.deepseek.com/v1", v1=False),
    "mistralai": _Api("chat", "https://api.mistral.ai/v1", v1=False),
    "groq": _Api("chat", "https://api.groq.com/openai/v1", v1=False),
    "xai": _Api("chat", "https://api.x.ai/v1", v1=False),
    "nanogpt": _Api("chat", "https://nano-gpt.com/api/v1", v1=False),
    "fireworks": _Api("chat", "https://api.fireworks.ai/inference/v1", v1=False),
    "moonshot": _Api("chat", "https://api.moonshot.ai/v1", v1=False),
    "perplexity": _Api("chat", "https://api.perplexity.ai", v1=False),
}
"""SillyTavern's chat completion sources that speak the OpenAI API (``mode`` cc); the
others (claude, makersuite, vertexai, cohere, ai21...) have APIs of their own."""

TOKENIZERS: dict[str, Literal["auto", "llama", "openai", "endpoint"]] = {
    "llama": "llama",
    "openai": "openai",
    "gpt2": "openai",
    "best_match": "auto",
    "api_current": "endpoint",
    "api_textgenerationwebui": "endpoint",
    "api_kobold": "endpoint",
}
"""SillyTavern's tokenizer names → storyloom's ``tokenizer``; others count with auto."""


class ImportedConnection(BaseModel):
    """What became of one SillyTavern profile."""

    source_name: str = Field(description="The profile's name in SillyTavern")
    name: str | None = Field(
        default=None, description="The connection it became (None: not imported)"
    )
    api: CompletionApi | None = None
    base_url: str = ""
    model: str = ""
    notes: list[str] = Field(
        default_factory=list,
        description="What was not carried over, or why the profile was not imported",
    )


class ConnectionImportResult(BaseModel):
    """The outcome of importing SillyTavern's connection profiles."""

    imported: list[str] = Field(description="Names of the connections made or replaced")
    profiles: list[ImportedConnection] = Field(description="Every profile, in file order")
    keys_note: str = Field(default=KEYS_NOTE, description="Why no key came with them")


def _name(profile: StConnectionProfile) -> str:
    name = "".join(c for c in profile.name if ord(c) >= 32 and ord(c) != 127)
    name = name.replace("/", "-").strip()[:CONNECTION_NAME_MAX].strip()
    if not name:
        name = f"SillyTavern {profile.id[:8]}".strip()
    return name


def _base_url(profile: StConnectionProfile, api: _Api) -> str:
    url = profile.api_url.strip().rstrip("/") or api.default_url
    if api.v1 and url and not url.endswith("/v1"):
        url += "/v1"
    return url


def _stop(text: str) -> list[str] | None:
    try:
        value = json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return None
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return [s for s in value if s] or None
    return None


def connection_of(profile: StConnectionProfile) -> tuple[ChatEndpoint | None, list[str]]:
    """The connection a profile becomes (None: its API is not one storyloom talks to)
    and notes on what did not come over."""
    notes: list[str] = []
    mode = profile.mode.strip().lower()
    api_name = profile.api.strip().lower()
    table = TEXT_APIS if mode == "tc" else CHAT_APIS if mode == "cc" else None
    if table is None:
        return None, [f"mode {profile.mode!r} is neither cc (chat) nor tc (text completion)"]
    api = table.get(api_name)
    if api is None:
        kind = "text completion" if mode == "tc" else "chat completion"
        return None, [
            f"{kind} API {profile.api or '(none)'!r} is not one storyloom talks to (it "
            "speaks the OpenAI API, llama.cpp's and KoboldCpp's): make a connection by hand"
        ]
    base_url = _base_url(profile, api)
    if not base_url:
        return None, [f"API {profile.api!r} needs a server URL and the profile has none"]
    fields: dict[str, object] = {"api": api.api, "base_url": base_url, "model": profile.model}
    if mode == "tc":
        if profile.instruct_state.lower() == "false":
            notes.append(
                "instruct mode was off in SillyTavern; storyloom always uses an instruct "
                "template (picked from the model name)"
            )
        else:
            fields["instruct_template"] = profile.instruct
        fields["context_template"] = profile.context
    tokenizer = profile.tokenizer.strip().lower()
    if tokenizer:
        fields["tokenizer"] = TOKENIZERS.get(tokenizer, "auto")
        if tokenizer == "gpt2":
            fields["token_encoding"] = "gpt2"
        if tokenizer not in TOKENIZERS:
            notes.append(f"tokenizer {profile.tokenizer!r}: counted with auto")
    stop = _stop(profile.stop_strings)
    if stop:
        fields["parameters"] = {"stop": stop}
    if profile.preset:
        notes.append(
            f"sampler preset {profile.preset!r} is a file of SillyTavern's, not part of "
            "settings.json: not imported (set the samplers on the connection)"
        )
    if profile.sysprompt:
        notes.append(f"system prompt {profile.sysprompt!r}: not imported")
    try:
        return ChatEndpoint.model_validate(fields), notes
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return None, [f"{where}: {first.get('msg', 'invalid')}"]


def import_connections(
    settings: Settings, profiles: list[StConnectionProfile], *, replace: bool = False
) -> tuple[Settings, ConnectionImportResult]:
    """``settings`` with a connection for each profile storyloom can talk to. A name
    that is taken is left alone unless ``replace`` (then it keeps its stored key)."""
    data = settings.to_file_json()
    connections: dict[str, dict[str, object]] = data["connections"]
    results: list[ImportedConnection] = []
    imported: list[str] = []
    for profile in profiles:
        result = ImportedConnection(source_name=profile.name)
        results.append(result)
        endpoint, notes = connection_of(profile)
        result.notes = notes
        if endpoint is None:
            continue
        name = _name(profile)
        check_connection_name(name)
        if name in imported:
            result.notes.append(f"another profile of the file is named {name!r}: skipped")
            continue
        old = connections.get(name)
        if old is not None and not replace:
            result.notes.append(
                f"a connection named {name!r} exists: kept as it is (import with replace "
                "to overwrite it)"
            )
            continue
        values = endpoint.model_dump(mode="json", exclude={"api_key"})
        values["api_key"] = old.get("api_key") if old is not None else None
        connections[name] = values
        imported.append(name)
        result.name, result.api = name, endpoint.api
        result.base_url, result.model = endpoint.base_url, endpoint.model
    return Settings.model_validate(data), ConnectionImportResult(
        imported=imported, profiles=results
    )
