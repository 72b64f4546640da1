"""The provider gateway: how a sandboxed agent CLI reaches its model without holding the key.

The CLI runs in the sandbox with its provider base URL set to ``{gateway_url}`` (e.g.
``http://127.0.0.1:18081/v1``) and the non-secret :data:`PLACEHOLDER_KEY` as its API key.
The in-sandbox forwarder pipes that loopback port to a unix socket on the host, where a
:class:`ProviderGateway` listens. The gateway forwards the requests on its protocol's
allow-list (:mod:`.routes`: the model calls, count_tokens, the model list), each with its
canonical path, to the provider's real base URL with the real credential
(``Authorization: Bearer`` for ``openai-*``, ``x-api-key`` for ``anthropic-messages``; none
if no key is configured, e.g. a local server), streams the reply back as it arrives, and counts what it saw.

Typical use (by the attempt)::

    with ProviderGateway(control / SOCKET_NAME, protocol="openai-chat",
                         base_url="https://llm.chutes.ai/v1", api_key=os.environ["CHUTES_API_KEY"],
                         transcript_path=run_dir / "transcript.jsonl") as gateway:
        url = gateway_url(gateway.inside_path)      # → "http://127.0.0.1:18081/v1"
        ... run the CLI in the sandbox ...
    usage = gateway.stats().usage(prices)          # the record's ModelUsage part

What it accepts (every byte from the sandbox is hostile): HTTP/1.1 (and 1.0) in origin form,
with keep-alive, one thread per connection, at most ``max_connections`` at once (503 past
that). Header at most 64 KiB within ``header_timeout`` (431 / closed), body at most
``max_body_bytes`` (413), and all bodies held at once at most ``max_buffered_body_bytes``
(503: retry), Content-Length or chunked; malformed requests get 400. A well-formed request
off the allow-list (any other method or path, a path that is not canonical, a query the
route does not take: :mod:`.routes`) is *forbidden*: answered 403 in the protocol's error
shape, counted in ``forbidden_requests`` and transcribed. None of this reaches the provider.

What it forwards: the same method, the canonical path and the query to the base URL's
origin, the client's headers minus hop-by-hop ones, Host, Content-Length (recomputed), Accept-Encoding (always
``identity`` so replies can be read) and every credential the CLI sent (Authorization,
x-api-key, api-key, x-goog-api-key, Cookie, OpenAI-Organization/-Project, Proxy-*).
``anthropic-version``/``anthropic-beta`` and the rest pass. An OpenAI chat request with
``"stream": true`` gets ``stream_options.include_usage = true`` so its usage comes back.
The provider is called with :mod:`http.client` (system CAs), over one kept-alive connection
per client connection, each socket operation bounded by ``request_timeout``; the harness's
own HTTP(S)_PROXY is used for remote providers, never for loopback ones. An unreachable
provider is answered ``502`` (``504`` on a timeout): a provider fault.

What goes back (every byte from a provider is hostile too; :mod:`.reply_relay`): the status
with its standard reason phrase, of the provider's headers only ``Content-Type``, retry
advice (``Retry-After``, ``retry-after-ms``, ``x-should-retry``), rate limits
(``x-ratelimit-*``, ``anthropic-ratelimit-*``), request ids (``request-id``,
``x-request-id``) and Codex's ``openai-model``, ``x-reasoning-included``, ``x-models-etag``,
then the body, framed by the gateway. Header values and body pass through one redactor of the
key's forms (:mod:`runner.agents.redaction`: literal, JSON-escaped, percent-encoded, base64 as in
credentials), which holds back a tail that may be the start of a form until the next read, so
that a key split across reads is found too; the transcript, the record's provider error and
evidence and the log are redacted by the same forms. A reply in an encoding other than
``identity`` (``Content-Encoding: gzip``, ``Transfer-Encoding: gzip, chunked``) would carry the
key compressed: it is not relayed, but answered ``502`` (code ``provider_encoded_reply``), a
provider fault.

Model calls over the agent spec's ``gateway.requests_per_minute`` (any 60 s window) are not
forwarded: the gateway answers them itself with ``429`` + ``Retry-After`` in the protocol's
error shape and counts them in ``rate_limited``, so that a 429 the agent provokes stays the
agent's while one the provider sends within that rate is the provider's fault.

Spending is capped per attempt (``spend``, :mod:`.spend`: the agent spec's ``gateway.spend``,
by default from the budget): a model call is forwarded only while the attempt's requests,
tokens and cost (calls in flight counted as the largest call so far) are below their
ceilings. Past them the gateway answers the call itself with its protocol's quota error
(openai-chat 400 and openai-responses 429 without Retry-After, both ``insufficient_quota``;
anthropic-messages 400 ``invalid_request_error``: what each protocol's CLIs give up on),
counts it in ``spend_refused`` (the agent's, never a provider fault) and the sandbox ends the
attempt (``limit_exceeded="spend"``, ``runtime_error``).

Model calls are the routes :mod:`.routes` counts as such: POSTs to ``.../chat/completions``
(openai-chat), ``.../responses`` and ``.../responses/compact`` (openai-responses) or
``/v1/messages`` (anthropic-messages); the model list and count_tokens are other requests
(they generate nothing). A model call's reply (JSON or server-sent events) is parsed as it
passes for its usage: chat ``usage.prompt_tokens``/``completion_tokens`` (streams: the final
usage chunk); Responses ``usage.input_tokens``/``output_tokens`` (streams:
``response.completed``; compact: its ``response.compaction`` object);
Anthropic ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` and
``output_tokens`` (streams: ``message_start`` then ``message_delta``'s cumulative counts).
Each model call ends as a step, a provider fault, a cut or a refusal
(:mod:`runner.agents.provider_faults`, the provider-fault rule, applied to each protocol by
:mod:`runner.agents.gateway.call_outcomes`): only steps count in ``steps``, and ``tokens_in`` /
``tokens_out`` are exactly the steps' usage. A call whose usage the provider owed and did not
report (a stream the client or the attempt's end broke off before its usage chunk, a step
without usage) is counted in ``unknown_usage_calls`` and its transcript line says
``"usage_unknown": true``: the usage is never guessed. See :class:`GatewayStats`.

``transcript.jsonl`` (appended, one JSON object a line, never the key; at most
``max_transcript_bytes``, 16 MiB, the attempt's host budget for it like the logs' 5 MiB a
stream: past it a ``transcript_full`` line, then only ``gateway_stop``, and the record notes
it)::

    {"event": "gateway_start", "t": 0.0, "protocol": ..., "base_url": ..., "inside_path": "/v1"}
    {"event": "model_call", "t": <seconds since start>, "call": 7, "protocol": "openai-chat",
     "method": "POST", "path": "/v1/chat/completions", "status": 200, "seconds": 1.234,
     "stream": true,                       # the reply was text/event-stream
     "usage": {"input": 1200, "output": 85} | null,
     "request": {"model": ..., "stream": ..., "n_messages": 12,
                 "messages": [the last 4 messages / input items, long strings cut],
                 "tools": ["bash", ...]} | null,         # null: the body was not JSON
     "reply": {"text": "...", "tool_calls": [{"name": "bash", "arguments": "{...}"}]}
              | {"error": "(code) message"},
     "interrupted": "client" | "upstream" | "stopped",   # only if the reply was broken off
     "usage_unknown": true}                # only if the provider owed usage and sent none
    {"event": "rate_limited", "t": ..., "path": ..., "retry_after": 12, "call": 7}
    {"event": "spend_refused", "t": ..., "path": ..., "ceiling": "tokens", "call": 612}
    {"event": "request", "t": ..., "method": "GET", "path": "/v1/models", "status": 200,
     "seconds": 0.05, "error": "..."}                    # error only for status >= 400
    {"event": "forbidden", "t": ..., "method": "DELETE", "target": "/v1/models/ft-1"}
                                  # escaped (\x1b), at most 300 characters and a note
    {"event": "transcript_full", "t": ..., "max_bytes": ...}    # only gateway_stop after it
    {"event": "gateway_stop", "t": ..., "stats": {GatewayStats fields}}

``request`` and ``reply`` are each cut to about 64 KiB. A request body is parsed for it (and
for include_usage) only if it has at most ``MAX_PARSE_VALUES`` commas and brackets, and big
ones one at a time: parsed JSON can take 25 times its text's size in Python objects. Malformed or oversized requests the
gateway refuses itself (400/413/431/503) are counted in ``GatewayStats.rejected`` and not
transcribed.
"""

from __future__ import annotations

from runner.agents.egress import GATEWAY_PORT as DEFAULT_PORT
from runner.agents.egress import GATEWAY_SOCKET_NAME as SOCKET_NAME
from runner.agents.gateway.model_requests import PROTOCOLS, Protocol
from runner.agents.gateway.server import ProviderGateway
from runner.agents.gateway.stats import GatewayStats

PLACEHOLDER_KEY = "tmlbench-gateway-placeholder"  # non-secret: the API key CLIs are given

__all__ = [
    "DEFAULT_PORT",
    "PLACEHOLDER_KEY",
    "PROTOCOLS",
    "SOCKET_NAME",
    "GatewayStats",
    "Protocol",
    "ProviderGateway",
    "gateway_url",
]


def gateway_url(inside_path: str, port: int = DEFAULT_PORT) -> str:
    """The base URL a CLI in the sandbox is given: loopback port + the provider's base path."""
    return f"http://127.0.0.1:{port}{inside_path}"
