"""What the gateway forwards: one allow-list of (method, path) per protocol, after one
canonical decoding of the request target. The single source of truth for what passes and how
each passing request is counted.

The key pays for whatever the gateway forwards, and a provider's API does more than generate:
``DELETE /v1/models/{id}`` deletes a fine-tuned model, ``GET /v1/chat/completions`` lists
stored completions, files, batches and fine-tuning spend money no model call accounts for. So
only the routes below pass, each as it is written here; everything else is *forbidden*:
answered by the gateway itself with 403 in the protocol's error shape, never forwarded, and
counted (``forbidden_requests``).

**The canonical decoding** of a request target (``/v1/chat/completions?x=1``):

1. It is origin-form (starts with ``/``), with no fragment.
2. Its path is percent-decoded exactly once; a ``%`` not followed by two hex digits refuses it.
3. The decoded path is then what is matched and what is forwarded, byte for byte. It must
   consist of ``A-Z a-z 0-9 . _ : - /`` only: no ``%`` (a double encoding such as ``%252e``
   is refused, never decoded twice), ``;`` (path parameters: ``/v1/models/..;``), ``\\``,
   ``?``, ``#``, spaces, control or non-ASCII bytes; and no ``.`` or ``..`` segment, empty
   segment (``//``) or trailing ``/``. Routes match case-sensitively.
4. The query is not decoded: it must be ``name=value`` pairs joined by ``&``, each name one
   the route takes and each value plain (``[A-Za-z0-9._:-]``), else the request is refused.
   A route takes no query unless a real CLI sends one (Claude Code's ``?beta=true``,
   Codex's ``?client_version=``, Claude Code's model-list paging).

So ``/v1/chat/completion%73`` is forwarded as ``/v1/chat/completions`` (what was checked is
what the provider reads), while ``/V1/Chat/Completions``, ``/v1/models/``,
``/v1/models/%252e%252e`` and ``GET /v1/chat/completions?limit=100`` are forbidden.

**The table** (paths relative to the provider's base path: ``/v1`` for the OpenAI protocols'
``https://host/v1``, ``""`` for Anthropic's ``https://api.anthropic.com``):

=====================  ======  ===========================  ===================  ==============
protocol               method  path                         counted as           query names
=====================  ======  ===========================  ===================  ==============
openai-chat            POST    /chat/completions            model call
openai-chat            GET     /models                      other request
openai-responses       POST    /responses                   model call
openai-responses       POST    /responses/compact           model call (usage)
openai-responses       GET     /models                      other request        client_version
anthropic-messages     POST    /v1/messages                 model call           beta
anthropic-messages     POST    /v1/messages/count_tokens    other request        beta
anthropic-messages     GET     /v1/models                   other request        beta, limit,
                                                                                 after_id,
                                                                                 before_id
anthropic-messages     GET     /v1/models/{id}              other request        beta
=====================  ======  ===========================  ===================  ==============

A *model call* generates tokens: it is numbered, classified by the provider-fault rule and its
usage parsed (``responses/compact`` answers a ``response.compaction`` object with a Responses
``usage``: Codex compacts its history with it). An *other request* generates nothing and is
billed no tokens (Anthropic's count_tokens is free; the model list): it is counted in
``other_requests``. ``{id}`` is one segment of ``[A-Za-z0-9._:-]`` (Claude Code looks its
model up; no OpenAI-protocol CLI does). Other methods (HEAD, OPTIONS, PUT, PATCH, DELETE,
CONNECT, ...) match no route.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Literal

from runner.agents.gateway.model_requests import Protocol
from runner.terminal import printable

CountedAs = Literal["model_call", "other"]

MAX_SHOWN_TARGET = 300  # characters of a forbidden target kept in the transcript
MAX_SHOWN_METHOD = 20

_ID = r"[A-Za-z0-9._:\-]{1,200}"
_VALUE = re.compile(r"[A-Za-z0-9._:\-]{1,200}")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
# A canonical path needs no encoding: nothing a provider could read otherwise ("?", "#", ";",
# "%", "\\", spaces, control or non-ASCII bytes). Every route is written in these characters.
_PATH_CHARS = re.compile(r"[A-Za-z0-9._:/\-]+")
_ANTHROPIC_PAGING = frozenset({"beta", "limit", "after_id", "before_id"})


@dataclass(frozen=True)
class Route:
    """One allowed (method, path) of a protocol, and how a request on it is counted."""

    protocol: Protocol
    method: str
    path: str  # relative to the base path; a regular expression ({id}: one plain segment)
    counted_as: CountedAs
    query_names: frozenset[str] = frozenset()

    def matches(self, method: str, relative_path: str) -> bool:
        return method == self.method and re.fullmatch(self.path, relative_path) is not None


ROUTES: tuple[Route, ...] = (
    Route("openai-chat", "POST", "/chat/completions", "model_call"),
    Route("openai-chat", "GET", "/models", "other"),
    Route("openai-responses", "POST", "/responses", "model_call"),
    Route("openai-responses", "POST", "/responses/compact", "model_call"),
    Route("openai-responses", "GET", "/models", "other", frozenset({"client_version"})),
    Route("anthropic-messages", "POST", "/v1/messages", "model_call", frozenset({"beta"})),
    Route("anthropic-messages", "POST", "/v1/messages/count_tokens", "other", frozenset({"beta"})),
    Route("anthropic-messages", "GET", "/v1/models", "other", _ANTHROPIC_PAGING),
    Route("anthropic-messages", "GET", f"/v1/models/{_ID}", "other", frozenset({"beta"})),
)


@dataclass(frozen=True)
class Allowed:
    """A request on the allow-list: its route and the target to forward (canonical)."""

    route: Route
    path: str  # the canonical path, base path included
    target: str  # the canonical path + "?" + the query, if it has one

    @property
    def model_call(self) -> Protocol | None:
        """The protocol whose reply to parse for usage, if the request is a model call."""
        return self.route.protocol if self.route.counted_as == "model_call" else None


def canonical_path(raw_path: str) -> str | None:
    """The path percent-decoded once, if it is canonical (see the module doc); else None."""
    if not raw_path.startswith("/") or _BAD_PERCENT.search(raw_path):
        return None
    path = urllib.parse.unquote_to_bytes(raw_path).decode("latin-1")
    if not _PATH_CHARS.fullmatch(path):
        return None
    segments = path.split("/")[1:]
    if any(s in ("", ".", "..") for s in segments):  # also "//" and a trailing "/"
        return None
    return path


def _query_allowed(query: str, names: frozenset[str]) -> bool:
    if not query:
        return True
    for pair in query.split("&"):
        name, sep, value = pair.partition("=")
        if not sep or name not in names or not _VALUE.fullmatch(value):
            return False
    return True


def route(protocol: Protocol, method: str, target: str, base_path: str) -> Allowed | None:
    """The route ``method target`` takes on a gateway for ``protocol``; None: forbidden."""
    raw_path, has_query, query = target.partition("?")
    if "#" in target or (has_query and not query):
        return None
    path = canonical_path(raw_path)
    if path is None or not path.startswith(base_path + "/"):
        return None
    relative = path[len(base_path) :]
    for candidate in ROUTES:
        if candidate.protocol == protocol and candidate.matches(method, relative):
            if not _query_allowed(query, candidate.query_names):
                return None
            return Allowed(candidate, path, f"{path}?{query}" if query else path)
    return None


def shown(text: str, limit: int = MAX_SHOWN_TARGET) -> str:
    """``text`` from the sandbox as the transcript may show it: escaped as a terminal may show
    it (:func:`runner.terminal.printable`), cut to ``limit`` characters with a note of the rest."""
    escaped = printable(text)
    if len(escaped) <= limit:
        return escaped
    return f"{escaped[:limit]} [... {len(escaped) - limit} more characters]"
