"""An agent spec (``agents/<id>.yaml``): who is benchmarked, how it runs, what it may reach."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from runner.agents.templates import FIELDS as TEMPLATE_FIELDS
from runner.agents.templates import unknown_placeholders
from runner.specs.base import Frozen


class AgentLimits(Frozen):
    cpus: int = Field(
        default=1,
        gt=0,
        description="CPU cores pinned to each attempt (its fixed share)",
    )
    memory_gb: float = Field(default=4.0, gt=0)
    pids: int = Field(default=256, gt=0)
    disk_gb: float = Field(default=2.0, gt=0)
    files: int = Field(
        default=200_000,
        gt=0,
        description="files and folders the workspace may hold (inodes)",
    )


class ModelIdentity(Frozen):
    provider: str | None = None
    model_id: str | None = None
    knowledge_cutoff: dt.date | None = None


class TokenPrices(Frozen):
    """USD per million tokens, from the provider's price page (cost = tokens × price)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float | None:
        """USD for these tokens; unknown (None) when either count is unknown."""
        if tokens_in is None or tokens_out is None:
            return None
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6


def _require_http_url(field: str, url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{field} must start with http:// or https://, got {url!r}")


class LlmSpec(Frozen):
    """How the built-in coding agent reaches its model: any OpenAI-compatible endpoint."""

    base_url: str = Field(description="e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(
        default=None,
        description="name of the harness's environment variable holding the key; "
        "None for local servers without auth. The key never enters the sandbox.",
    )
    temperature: float | None = Field(default=0.0, ge=0)
    max_tokens: int | None = Field(default=4096, gt=0, description="per model reply")
    prices: TokenPrices | None = None
    request_timeout_seconds: float = Field(default=300, gt=0)
    max_retries: int = Field(default=5, ge=0, description="per request, on 429/5xx/network errors")
    max_steps: int = Field(default=200, gt=0, description="model replies per attempt")
    context_chars: int = Field(
        default=200_000,
        gt=0,
        description="above this many characters of conversation, old tool outputs are elided",
    )
    tool_output_chars: int = Field(default=8_000, gt=0, description="per tool result")
    read_file_bytes: int = Field(default=50_000, gt=0, description="cap of the read_file tool")
    extra_body: dict[str, object] = Field(
        default_factory=dict,
        description="extra fields sent with every chat-completions request",
    )

    @model_validator(mode="after")
    def _http_url(self) -> LlmSpec:
        _require_http_url("llm.base_url", self.base_url)
        return self


class EgressSpec(Frozen):
    """Hosts besides its provider that a command agent may reach, through the harness's proxy.

    Every other host is refused and recorded (``egress_denied_hosts``); an empty list is the
    usual case, as the provider is reached through the gateway instead.
    """

    allow: tuple[str, ...] = Field(
        default=(), description="'host' (port 443) or 'host:port' the agent may reach"
    )


EXACT_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]*")


class CliSpec(Frozen):
    """An agent CLI pinned to one version: ``tmlbench agents install`` puts it in a managed prefix."""

    npm: str | None = Field(default=None, description="npm package, e.g. '@openai/codex'")
    pypi: str | None = Field(default=None, description="PyPI distribution, e.g. 'aider-chat'")
    path: str | None = Field(
        default=None,
        description="host folder holding an already installed CLI (bin/ or itself)",
    )
    version: str = Field(description="the exact version to install (no ranges)")
    bin: str = Field(description="the executable's name, on PATH inside the sandbox")
    version_args: tuple[str, ...] = Field(
        default=("--version",), description="arguments that make it print its version"
    )
    requirements: tuple[str, ...] = Field(
        default=(),
        description="pypi only: exact pins installed beside it ('name==1.2.3')",
    )

    @model_validator(mode="after")
    def _one_source(self) -> CliSpec:
        sources = [name for name in ("npm", "pypi", "path") if getattr(self, name)]
        if len(sources) != 1:
            raise ValueError(f"cli needs exactly one of npm, pypi, path (got {sources or 'none'})")
        if not EXACT_VERSION.fullmatch(self.version):
            raise ValueError(f"cli.version must be one exact version, got {self.version!r}")
        if "/" in self.bin or not self.bin:
            raise ValueError(f"cli.bin must be an executable's name, got {self.bin!r}")
        if self.requirements and not self.pypi:
            raise ValueError("cli.requirements are for pypi CLIs only")
        loose = [r for r in self.requirements if "==" not in r]
        if loose:
            raise ValueError(f"cli.requirements must be exact pins (name==version): {loose}")
        return self

    @property
    def source(self) -> Literal["npm", "pypi", "path"]:
        return "npm" if self.npm else "pypi" if self.pypi else "path"

    @property
    def package(self) -> str:
        return self.npm or self.pypi or self.path or ""

    def describe(self) -> str:
        return f"{self.source} {self.package} {self.version}"


GatewayProtocol = Literal["openai-chat", "openai-responses", "anthropic-messages"]


class SpendSpec(Frozen):
    """Per-attempt ceilings on what the agent's model calls may use (``runner.agents.gateway.spend``).

    Each left out defaults from the attempt's budget, per minute of it (for at least 5
    minutes): 60 model calls, 2,000,000 tokens and, with ``prices``, $2.00. Past a ceiling the
    gateway answers model calls with its protocol's quota error and the attempt ends as a
    broken cap (``limit_exceeded: spend``, ``runtime_error``).
    """

    requests: int | None = Field(default=None, gt=0, description="model calls forwarded")
    tokens: int | None = Field(default=None, gt=0, description="tokens in + out")
    cost_usd: float | None = Field(
        default=None, gt=0, description="dollars at gateway.prices (needs prices)"
    )


class GatewaySpec(Frozen):
    """A command agent's model provider, reached only through the harness's gateway.

    Inside the sandbox the CLI is given ``{gateway_url}`` as its base URL and
    ``{gateway_key}`` (a placeholder) as its key; the gateway forwards to ``base_url`` with
    the real key and counts usage from every response.
    """

    protocol: GatewayProtocol
    base_url: str = Field(description="the provider's real base URL, e.g. https://llm.chutes.ai/v1")
    api_key_env: str | None = Field(
        default=None,
        description="harness variable holding the key; None for local servers",
    )
    prices: TokenPrices | None = None
    request_timeout_seconds: float = Field(default=600, gt=0)
    requests_per_minute: int = Field(
        default=60,
        gt=0,
        description="model calls the agent may start in any 60 s; the gateway answers calls "
        "over it with its own 429 + Retry-After (counted in rate_limited, never forwarded), "
        "so a provider 429 within it is the provider's fault. Set it at or below the "
        "provider account's own limit",
    )
    spend: SpendSpec = Field(
        default=SpendSpec(),
        description="per-attempt ceilings (requests, tokens, cost_usd); defaults from the budget",
    )

    @model_validator(mode="after")
    def _http_url(self) -> GatewaySpec:
        _require_http_url("gateway.base_url", self.base_url)
        if self.spend.cost_usd is not None and self.prices is None:
            raise ValueError(
                "gateway.spend.cost_usd needs gateway.prices (input_per_mtok, output_per_mtok) "
                "to turn tokens into dollars; give prices or drop cost_usd"
            )
        return self


FILE_MAX_BYTES = 1024**2  # each of a command agent's config files


def _check_placeholders(where: str, text: str) -> None:
    unknown = unknown_placeholders(text)
    if unknown:
        raise ValueError(
            f"{where}: unknown placeholder(s) {', '.join('{' + n + '}' for n in unknown)} "
            f"(known: {', '.join(TEMPLATE_FIELDS)}; write {{{{name}}}} for a literal {{name}})"
        )


class AgentSpec(Frozen):
    id: str
    kind: Literal["baseline", "command", "llm"]
    title: str
    harness: str = Field(description="what drives the model or program, e.g. 'tmlbench-baseline'")
    harness_version: str = Field(
        default="1",
        description="for a command agent with 'cli': the version the CLI reports",
    )
    model: ModelIdentity = ModelIdentity()
    command: tuple[str, ...] = Field(
        default=(),
        description="argv template; placeholders "
        + " ".join("{" + f + "}" for f in TEMPLATE_FIELDS),
    )
    code_dir: str | None = Field(
        default=None,
        description="folder (relative to the agent file) mounted read-only at {agent_dir}",
    )
    limits: AgentLimits = AgentLimits()
    trusted: bool = Field(
        default=False,
        description="built-in code we wrote; only trusted agents may use the process backend",
    )
    llm: LlmSpec | None = Field(default=None, description="kind 'llm' only: the model endpoint")
    cli: CliSpec | None = Field(default=None, description="kind 'command' only: the pinned CLI")
    gateway: GatewaySpec | None = Field(
        default=None,
        description="kind 'command' only: its model provider, behind the gateway",
    )
    egress: EgressSpec | None = Field(
        default=None,
        description="kind 'command' only: other hosts reachable through the proxy",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="kind 'command' only: non-secret variables for the CLI (templates allowed)",
    )
    files: dict[str, str] = Field(
        default_factory=dict,
        description="kind 'command' only: files written into HOME before it starts "
        "(relative path -> contents; templates allowed)",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, data: object) -> object:
        if isinstance(data, dict) and "secrets" in data:
            raise ValueError(
                "'secrets' is gone: no key ever enters the sandbox. Give the provider as "
                "'gateway' (protocol, base_url, api_key_env) and hand the CLI {gateway_url} "
                "and {gateway_key} instead"
            )
        return data

    @model_validator(mode="after")
    def _runnable(self) -> AgentSpec:
        if self.kind in ("baseline", "command") and not self.command:
            raise ValueError(f"agent kind {self.kind!r} needs a 'command' argv template")
        if self.kind == "llm":
            if self.llm is None:
                raise ValueError(
                    "agent kind 'llm' needs an 'llm' block (base_url, api_key_env, ...)"
                )
            if not self.model.model_id:
                raise ValueError("agent kind 'llm' needs model.model_id (sent to the endpoint)")
            if self.command:
                raise ValueError("agent kind 'llm' runs the built-in agent loop: drop 'command'")
        elif self.llm is not None:
            raise ValueError(f"'llm' is only for agent kind 'llm', not {self.kind!r}")
        command_only: dict[str, object] = {
            "cli": self.cli,
            "gateway": self.gateway,
            "egress": self.egress,
        }
        command_only |= {"env": self.env, "files": self.files}
        misplaced = [name for name, value in command_only.items() if value]
        if self.kind != "command" and misplaced:
            raise ValueError(f"{', '.join(misplaced)}: only for agent kind 'command'")
        for i, part in enumerate(self.command):
            _check_placeholders(f"command[{i}]", part)
        for name, value in self.env.items():
            _check_placeholders(f"env.{name}", value)
        for name, text in self.files.items():
            _check_placeholders(f"files.{name}", text)
            if len(text.encode("utf-8")) > FILE_MAX_BYTES:
                raise ValueError(f"files.{name}: over {FILE_MAX_BYTES} bytes (a config file)")
            if name.startswith("/") or ".." in Path(name).parts or not name.strip():
                raise ValueError(f"files.{name}: give a path relative to HOME, without '..'")
        uses_gateway = any(
            "{gateway_" in text
            for text in (*self.command, *self.env.values(), *self.files.values())
        )
        if uses_gateway and self.gateway is None:
            raise ValueError("{gateway_url}/{gateway_key} are used but no 'gateway' is given")
        return self
