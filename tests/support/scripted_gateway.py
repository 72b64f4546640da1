"""A real provider gateway in front of a scripted provider on loopback (the gateway tests')."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from runner.agents.gateway import ProviderGateway
from runner.agents.scripted_provider import ANTHROPIC_MESSAGES, ScriptedProvider

KEY = "sk-real-provider-key-0123456789"
MODEL = "stub/model"


@contextlib.contextmanager
def behind_gateway(
    tmp_path: Path, script: list, protocol: str, **kw: object
) -> Iterator[tuple[ProviderGateway, ScriptedProvider]]:
    """The gateway on ``tmp_path/gw.sock`` (transcript beside it) forwarding to a provider that
    answers ``script`` with ``KEY``; ``kw`` are the gateway's other arguments."""
    with ScriptedProvider(script, api_key=KEY, model=MODEL) as provider:
        base = provider.base_url if protocol != ANTHROPIC_MESSAGES else provider.root_url
        gateway = ProviderGateway(
            tmp_path / "gw.sock",
            protocol=protocol,  # type: ignore[arg-type]
            base_url=base,
            api_key=KEY,
            transcript_path=tmp_path / "transcript.jsonl",
            **kw,  # type: ignore[arg-type]
        )
        with gateway:
            yield gateway, provider
