"""Extraction: the prompt, the model's JSON claims, quote location and the admission checks."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from satchel.memory.domain import UNRESOLVABLE, Candidate, RejectedClaim, Span, StoredMessage
from satchel.memory.store.entities import normalize

CODE_VERSION = "satchel.memory.formation/1"
MAX_CLAIMS = 64
CHARACTERS_PER_CLAIM = 16  # a turn may have one claim per this many characters, at least one
CLAIM_TOKENS = 160  # output tokens allowed for one claim: its fields, a statement and a quote
REPLY_TOKENS = 16  # output tokens of the reply around its claims
MAX_NAME_CHARS = 256
MAX_STATEMENT_CHARS = 1_024
MAX_QUOTE_CHARS = 4_096
SPEAKER = "I"
# How the person refers to themself; such a subject is the speaker, and only the person says it.
FIRST_PERSON = frozenset({"i", "me", "my", "myself", "mine", "user", "the user"})

SYSTEM_PROMPT = """\
You extract durable facts from one conversation turn between a person (role "user") and an \
assistant. Answer with one JSON object: {"claims": [...]}, and nothing else.
Each claim is an object with these fields:
- "subject": who or what the fact is about, by name. When the person speaks about themself, \
the subject is "I". Never a pronoun such as he, she, it or they.
- "predicate": exactly one of the allowed predicates listed below.
- "object": the value, by name.
- "statement": one short sentence stating the fact.
- "quote": a verbatim excerpt of one message that states the fact, copied exactly.
- "message": the number of the message the quote is from.
- "asserted": false when the message only asks, supposes, plans hypothetically or denies it.
- "current": false when the fact was true only in the past and no longer holds.
- "confidence": a number from 0 to 1.
- "valid_from": an ISO 8601 date when the message says since when the fact holds, else null.
Extract only what a message states; invent nothing. With nothing to extract, answer \
{"claims": []}. Give at most LIMIT claims.
Allowed predicates: """

PROMPT_ID = "extract/2:" + hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest()[:12]
SCHEMA_NAME = "claims"


def claim_limit(messages: list[StoredMessage]) -> int:
    """How many claims the prompt allows for the turn: one per `CHARACTERS_PER_CLAIM` characters
    (a short sentence states a fact), at least one and at most `MAX_CLAIMS`."""
    characters = sum(len(m.content) for m in messages)
    return min(MAX_CLAIMS, max(1, -(-characters // CHARACTERS_PER_CLAIM)))


def output_tokens(limit: int) -> int:
    """The output limit of a reply holding `limit` claims."""
    return REPLY_TOKENS + limit * CLAIM_TOKENS


def prompt(
    messages: list[StoredMessage], predicates: list[str], limit: int
) -> list[dict[str, str]]:
    """The chat request: instructions with the claim limit and the vocabulary, then the turn's
    numbered messages."""
    instructions = SYSTEM_PROMPT.replace("LIMIT", str(limit)) + ", ".join(sorted(predicates))
    turn = "\n\n".join(f"[message {m.ordinal}] {m.role}:\n{m.content}" for m in messages)
    return [
        {"role": "system", "content": instructions + "."},
        {"role": "user", "content": turn},
    ]


def claims_schema(predicates: list[str], limit: int) -> dict[str, Any]:
    """The JSON schema of a reply: at most `limit` claims, each with every field the prompt
    names and a predicate of the vocabulary."""
    fields: dict[str, Any] = {
        "subject": {"type": "string"},
        "predicate": {"enum": sorted(predicates)},
        "object": {"type": "string"},
        "statement": {"type": "string"},
        "quote": {"type": "string"},
        "message": {"type": "integer"},
        "asserted": {"type": "boolean"},
        "current": {"type": "boolean"},
        "confidence": {"type": "number"},
        "valid_from": {"type": ["string", "null"]},
    }
    claim = {
        "type": "object",
        "properties": fields,
        "required": list(fields),
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"claims": {"type": "array", "items": claim, "maxItems": limit}},
        "required": ["claims"],
        "additionalProperties": False,
    }


def claims_of(reply: dict[str, Any]) -> list[Any] | None:
    """The reply's claim list, or None when the reply does not carry one."""
    claims = reply.get("claims")
    return claims if isinstance(claims, list) else None


def locate(quote: str, content: str) -> tuple[int, int] | None:
    """The character range of `quote` in `content`: exact, else with whitespace collapsed."""
    start = content.find(quote)
    if start >= 0:
        return start, start + len(quote)
    words = quote.split()
    if not words:
        return None
    found = re.search(r"\s+".join(re.escape(word) for word in words), content)
    return (found.start(), found.end()) if found else None


def find_span(quote: str, messages: list[StoredMessage], named: int | None) -> Span | None:
    """The quote in the message the model named, else in the first message holding it."""
    ordered = sorted(messages, key=lambda m: (m.ordinal != named, m.ordinal))
    for message in ordered:
        where = locate(quote, message.content)
        if where is not None:
            start, end = where
            content = message.content
            byte_start = len(content[:start].encode("utf-8"))
            exact = content[start:end]
            return Span(message, exact, byte_start, byte_start + len(exact.encode("utf-8")))
    return None


def bounded(claim: Any) -> dict[str, Any]:
    """What is kept of a refused claim: known fields, strings cut to a bound."""
    if not isinstance(claim, dict):
        return {"value": json.dumps(claim)[:MAX_NAME_CHARS]}
    kept: dict[str, Any] = {}
    for key in (
        "subject",
        "predicate",
        "object",
        "statement",
        "quote",
        "message",
        "asserted",
        "current",
        "confidence",
        "valid_from",
    ):
        if key in claim:
            value = claim[key]
            kept[key] = value[:MAX_QUOTE_CHARS] if isinstance(value, str) else value
            if not isinstance(value, str | int | float | bool | None):
                kept[key] = json.dumps(value)[:MAX_NAME_CHARS]
    return kept


def _text(value: Any, limit: int) -> str | None:
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        return None
    return " ".join(value.split())


def _flag(value: Any) -> bool | None:
    """An explicit boolean; absent counts as true, anything else as unknown (None)."""
    if value is None:
        return True
    return value if isinstance(value, bool) else None


def _time(value: Any, default: datetime) -> datetime | None:
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _confidence(value: Any) -> float | None:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return min(1.0, max(0.0, float(value)))


def screen(
    claim: Any, messages: list[StoredMessage], vocabulary: dict[str, str]
) -> Candidate | RejectedClaim:
    """Every admission check the turn alone decides, in order; duplicates are checked on write."""
    if not isinstance(claim, dict):
        return RejectedClaim("malformed", bounded(claim))
    kept = bounded(claim)
    subject = _text(claim.get("subject"), MAX_NAME_CHARS)
    predicate = _text(claim.get("predicate"), MAX_NAME_CHARS)
    obj = _text(claim.get("object"), MAX_NAME_CHARS)
    quote = claim.get("quote")
    named = claim.get("message")
    asserted, current = _flag(claim.get("asserted")), _flag(claim.get("current"))
    confidence = _confidence(claim.get("confidence"))
    if (
        subject is None
        or predicate is None
        or obj is None
        or not isinstance(quote, str)
        or not quote.strip()
        or len(quote) > MAX_QUOTE_CHARS
        or (named is not None and (isinstance(named, bool) or not isinstance(named, int)))
        or asserted is None
        or current is None
        or confidence is None
    ):
        return RejectedClaim("malformed", kept)
    relation = predicate.lower().replace(" ", "_").replace("-", "_")
    if relation not in vocabulary:
        return RejectedClaim("unmapped_predicate", kept)
    first_person = normalize(subject) in FIRST_PERSON
    if not first_person and normalize(subject) in UNRESOLVABLE:
        return RejectedClaim("unresolvable_subject", kept)
    if normalize(obj) in UNRESOLVABLE:
        return RejectedClaim("unresolvable_object", kept)
    span = find_span(quote, messages, named)
    if span is None:
        return RejectedClaim("unlocatable_quote", kept)
    if not asserted:
        return RejectedClaim("not_asserted", kept)
    if not current:
        return RejectedClaim("not_current", kept)
    if first_person and span.message.role != "user":
        return RejectedClaim("not_spoken_by_person", kept)
    valid_from = _time(claim.get("valid_from"), span.message.occurred_at)
    if valid_from is None:
        return RejectedClaim("malformed", kept)
    statement = _text(claim.get("statement"), MAX_STATEMENT_CHARS)
    subject = SPEAKER if first_person else subject
    obj = SPEAKER if normalize(obj) in FIRST_PERSON else obj
    return Candidate(
        subject=subject,
        predicate=relation,
        object=obj,
        statement=statement or f"{subject} {relation.replace('_', ' ')} {obj}",
        confidence=confidence,
        valid_from=valid_from,
        span=span,
        cardinality=vocabulary[relation],
    )
