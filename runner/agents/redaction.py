"""Finding the provider key in bytes the provider sent, so that it never reaches the sandbox.

Every byte the gateway relays from the provider toward the client (the reply body however it
is framed, the header values it keeps) and every host file made of provider text (the
transcript, the record's provider error and fault evidence, the log) passes through one
:class:`SecretForms`: the key's forms, compiled once per gateway.

What is found (a *form* of the key; each is replaced by as many ``*``, so that a reply's
Content-Length stays right):

- the key itself;
- the key as a reflected request would carry it in a JSON string or a URL: any of its
  characters written literally, as a JSON escape (``\\uXXXX``, hex digits in either case, a
  surrogate pair beyond the BMP, ``\\/`` and the other short escapes; the escape's backslash
  doubled for a JSON string inside a JSON string, up to four backslashes), percent-encoded
  once or twice (``%XX``, ``%25XX`` of each UTF-8 byte, either case; ``+`` for a space),
  mixed freely character by character;
- the key inside base64 (standard and URL-safe alphabets), at each of the three alignments a
  byte string can have in a base64 run: so ``base64(key)``, ``base64("Bearer " + key)`` and
  Basic credentials ``base64(user + ":" + key)`` for any user are all found. At an alignment
  the base64 characters that depend on the key's bytes alone are fixed, and those are what is
  found (so the one or two characters at each end, which mix in neighbouring bytes, are not
  replaced: together they carry less than 12 bits of the key). Its ``+ / = - _`` may be
  JSON-escaped or percent-encoded as above (a base64 value in a JSON body with ``\\/``, in a
  URL with ``%2F``); its letters and digits, which no encoder escapes, stand as they are.

A key shorter than :data:`MIN_SECRET_CHARS` is not looked for (a local server's placeholder).

Why nothing more is claimed: these are the forms in which a provider or a proxy *reflects*
what the gateway sent it (an echoed request, an ``Authorization`` header in a debug reply, an
error quoting the credentials). A provider that means to hand the key on holds it and can
always encode it some other way (split over several JSON strings or SSE events, reversed,
encrypted), which no redaction can find; nor are fragments of the key replaced (a provider's
own masked echo ``sk-pr***abcd``: :func:`runner.agents.gateway.stats.redact_masked` keeps those out of
host files). A compressed reply would hide every form: the relay refuses one
(:mod:`.reply_relay`).

Streaming (:class:`StreamRedactor`): a form may straddle two reads, so after each read the
redactor keeps back the shortest tail that could still grow into a form (at most the
longest form's length minus one byte; usually nothing) and releases it with the next read, or
at the end of the body. Each read is scanned once, with that tail: O(n) for n bytes relayed.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterator

STAR = b"*"
# A shorter key is a local server's placeholder (``EMPTY``, ``none``): it guards nothing, and
# looking for it would star ordinary words in every reply.
MIN_SECRET_CHARS = 8
_SHORT_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "\b": "b",
    "\f": "f",
    "\n": "n",
    "\r": "r",
    "\t": "t",
}
_MAX_BACKSLASHES = 4  # an escape in a JSON string nested in JSON strings: \\u 3 levels deep
_MIN_BASE64_CORE = 8  # shorter fixed runs (keys of a few bytes) are left to the literal forms

Atom = bytes  # a regex matching exactly one byte


def _byte(value: int) -> Atom:
    return re.escape(bytes([value]))


def _hex_digit(digit: str) -> Atom:
    return f"[{digit.lower()}{digit.upper()}]".encode() if digit.isalpha() else digit.encode()


def _hex(value: int, width: int) -> list[Atom]:
    return [_hex_digit(d) for d in f"{value:0{width}x}"]


def _spellings(char: str) -> list[list[Atom]]:
    """The ways ``char`` may be written in a JSON string or a URL, each a list of atoms."""
    raw = char.encode("utf-8", "surrogatepass")
    spellings = [[_byte(b) for b in raw]]
    for percent in (b"%", b"%25"):  # percent-encoded once or twice
        spellings.append([a for b in raw for a in (*map(_byte, percent), *_hex(b, 2))])
    if char == " ":
        spellings.append([re.escape(b"+")])
    point = ord(char)
    units = (
        [point]
        if point < 0x10000
        else [0xD800 + ((point - 0x10000) >> 10), 0xDC00 + ((point - 0x10000) & 0x3FF)]
    )
    # After a backslash: the \\u escape (one per UTF-16 unit), or a short one.
    escapes = [[[b"u", *_hex(unit, 4)] for unit in units]]
    if char in _SHORT_ESCAPES:
        escapes.append([[re.escape(_SHORT_ESCAPES[char].encode())]])
    # A JSON string inside a JSON string doubles an escape's backslash at each level.
    for run in range(1, _MAX_BACKSLASHES + 1):
        for units_tails in escapes:
            spellings.append([a for tail in units_tails for a in (*[_byte(92)] * run, *tail)])
    return spellings


def _full(spellings: list[list[Atom]]) -> bytes:
    return b"(?:" + b"|".join(b"".join(s) for s in spellings) + b")"


def _proper_prefix(spellings: list[list[Atom]]) -> bytes:
    """A regex for the proper prefixes of the spellings (the empty one included)."""
    branches = []
    for atoms in spellings:
        nested = b""
        for atom in reversed(atoms[:-1]):
            nested = atom + (b"(?:" + nested + b")?" if nested else b"")
        if nested:
            branches.append(nested)
    return b"(?:" + b"|".join(branches) + b")?" if branches else b""


def _base64_cores(secret: bytes) -> list[str]:
    """The base64 characters fixed by ``secret``'s bytes alone, at each alignment, in the
    standard and the URL-safe alphabet."""
    cores = []
    for align in range(3):
        encoded = base64.b64encode(bytes(align) + secret).decode()
        bits = 8 * (align + len(secret))
        core = encoded[-(-8 * align // 6) : bits // 6]
        if len(core) >= _MIN_BASE64_CORE:
            cores += [core, core.translate(str.maketrans("+/", "-_"))]
    return list(dict.fromkeys(cores))


class SecretForms:
    """The forms of one secret (see the module doc); ``secret`` None, or shorter than
    :data:`MIN_SECRET_CHARS`: finds nothing.

    Fast where it matters: the literal forms are replaced by ``bytes.replace``; the regex of
    all spellings runs only around the escapes that start a spelled character (``%``,
    ``\\u``, ``\\/``, ...), since a form with none of them is a literal one.
    """

    def __init__(self, secret: str | None):
        self.secret = secret if secret and len(secret) >= MIN_SECRET_CHARS else None
        secret = self.secret
        raw = (secret or "").encode("utf-8", "surrogatepass")
        texts = [secret, *_base64_cores(raw)] if secret else []
        self._literals = [raw, *(t.encode() for t in texts[1:])] if secret else []
        # The key's characters in every spelling; base64's letters and digits only as they
        # are (no encoder escapes them), its + / = and - _ in every spelling.
        forms = [[_spellings(c) for c in texts[0]]] if secret else []
        forms += [
            [_spellings(c) if not c.isalnum() else [[_byte(ord(c))]] for c in core]
            for core in texts[1:]
        ]
        # Where an escaped spelling starts: any character may be \uXXXX or %XX; the other
        # escapes only for the characters the forms hold.
        chars = set("".join(texts))
        self._escapes = [b"\\u", b"%"] if secret else []
        self._escapes += [("\\" + e).encode() for c, e in _SHORT_ESCAPES.items() if c in chars]
        if " " in chars:
            self._escapes.append(b"+")
        self._form_bytes = bytes(
            set(raw) | set("".join(texts).encode()) | set(b'%+\\u0123456789abcdefABCDEF"/bfnrt')
        )
        # A form: one spelling of each character in turn.
        self._whole = (
            re.compile(b"|".join(b"".join(_full(c) for c in form) for form in forms))
            if forms
            else None
        )
        # A proper prefix of a form that reaches the end of the data: whole spellings, then
        # part of the next (each group after the end matches empty), never the whole form.
        self._partial = (
            re.compile(
                b"|".join(
                    b"".join(
                        b"(?:" + _full(c) + b"|" + _proper_prefix(c) + rb"\Z)" for c in form[:-1]
                    )
                    + _proper_prefix(form[-1])
                    + rb"\Z"
                    for form in forms
                )
            )
            if forms
            else None
        )
        self.longest = max((sum(max(len(s) for s in c) for c in form) for form in forms), default=0)
        self.max_held = max(self.longest - 1, 0)  # the most a stream keeps back between reads

    def redact(self, data: bytes) -> bytes:
        """``data`` with every whole form replaced by as many ``*`` (the same length)."""
        return self._replaced(data, None)

    def redact_text(self, text: str, replacement: str = "[redacted]") -> str:
        """``text`` (provider text bound for a host file) with every form replaced."""
        if self._whole is None:
            return text
        data = text.encode("utf-8", "surrogatepass")
        return self._replaced(data, replacement.encode()).decode("utf-8", "surrogatepass")

    def _replaced(self, data: bytes, replacement: bytes | None) -> bytes:
        if self._whole is None:
            return data
        for literal in self._literals:
            if literal in data:
                data = data.replace(literal, replacement or STAR * len(literal))
        spans = list(self._escaped_spans(data))
        if not spans:
            return data
        pieces = []
        done = 0
        for start, end in spans:
            found = self._whole.sub(
                lambda m: replacement or STAR * (m.end() - m.start()), data[start:end]
            )
            pieces += [data[done:start], found]
            done = end
        pieces.append(data[done:])
        return b"".join(pieces)

    def _escaped_spans(self, data: bytes) -> Iterator[tuple[int, int]]:
        """Disjoint spans of ``data`` that hold every form spelled with an escape: a form
        with an escape at ``i`` lies within ``[i - longest, i + longest)``, and the spans are
        those intervals merged. C-speed finds, a step per ``longest`` bytes at most."""
        reach = self.longest
        margin = reach + max((len(e) for e in self._escapes), default=0)
        done = 0
        while True:
            first = min(
                (i for i in (data.find(e, done) for e in self._escapes) if i >= 0), default=-1
            )
            if first < 0:
                return
            start, end = max(first - reach, done), first + reach
            while True:  # merge the next escape's interval while it overlaps this span
                last = max(data.rfind(e, first + 1, end + margin) for e in self._escapes)
                if last <= first:
                    break
                first, end = last, last + reach
            end = min(end, len(data))
            yield start, end
            done = end

    def held_from(self, data: bytes) -> int:
        """Where the tail of ``data`` that could still grow into a form starts (len: none)."""
        if self._partial is None or not data:
            return len(data)
        tail = data[-self.max_held :] if self.max_held else b""
        run = len(tail) - len(tail.rstrip(self._form_bytes))  # a form is made of these bytes
        if not run:
            return len(data)
        found = self._partial.search(data, len(data) - run)
        return found.start() if found is not None else len(data)

    def stream(self) -> StreamRedactor:
        return StreamRedactor(self)


@functools.lru_cache(maxsize=8)
def secret_forms(secret: str | None) -> SecretForms:
    """The compiled forms of ``secret`` (compiled once per secret: a gateway's and its
    ledger's, a built-in agent's client's)."""
    return SecretForms(secret)


class StreamRedactor:
    """Redacts one byte stream read in pieces: ``feed`` each piece, then ``finish``.

    What ``feed`` returns may go out at once; it keeps back a tail that could still be the
    start of a form (at most ``forms.max_held`` bytes). ``finish`` returns that tail once the
    stream ended normally; a stream broken off should drop it (it may be most of a key).
    """

    def __init__(self, forms: SecretForms):
        self._forms = forms
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        if self._forms.secret is None:
            return data
        data = self._forms.redact(self._held + data if self._held else data)
        cut = self._forms.held_from(data)
        self._held = data[cut:]
        return data[:cut]

    def finish(self) -> bytes:
        held, self._held = self._held, b""
        return held
