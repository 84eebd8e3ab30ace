"""Every v1 operation once: each method names the contract's fields and builds its `Call`.

`Operations[A]` is shared by both clients; the synchronous one answers `dict`s, the asynchronous
one coroutines of them. A field left as None is left out of the body.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from satchel.memory.client.calls import Call, fields, keyed, new_key

Body = Mapping[str, Any]

# How a list route's `next` becomes the next request: the field it goes in, and whether only its
# `id` is sent (the routes whose `after` is a bare id) rather than the whole cursor.
CURSORS: dict[str, tuple[str, bool]] = {
    "list_records": ("after", False),
    "record_history": ("before", False),
    "resolve_citation": ("after", False),
    "list_artifacts": ("after", True),
    "list_subjects": ("after", True),
    "list_entities": ("after", False),
    "list_feedback": ("after", False),
}


def next_fields(
    listing: str, page: Mapping[str, Any], given: dict[str, Any]
) -> dict[str, Any] | None:
    """The fields of the request for the page after `page` of `listing`; None after the last."""
    cursor = page.get("next")
    if not cursor:
        return None
    name, id_only = CURSORS[listing]
    return {**given, name: cursor["id"] if id_only else cursor}


def _post(path: str, body: dict[str, Any], *, repeatable: bool = True) -> Call:
    return Call("POST", path, body, 200, repeatable)


class Operations[A]:
    """The v1 operations; a subclass supplies `_run`, the transport."""

    def _run(self, call: Call) -> A:
        raise NotImplementedError

    # ---- turns, recall and context ----------------------------------------------------------

    def observe(
        self,
        *,
        messages: Sequence[Body],
        idempotency_key: str | None = None,
        data_subject_id: str | None = None,
        occurred_at: str | None = None,
    ) -> A:
        """Store a turn; durable when this answers. With no key, one is made for the retries."""
        body = fields(
            idempotency_key=idempotency_key or new_key(),
            messages=[dict(m) for m in messages],
            data_subject_id=data_subject_id or None,
            occurred_at=occurred_at or None,
        )
        return self._run(Call("POST", "/v1/observations", body, 201))

    def recall(
        self,
        *,
        question: str,
        data_subject_id: str | None = None,
        as_of: str | None = None,
        as_known_at: str | None = None,
        max_characters: int | None = None,
        source_roles: Sequence[str] | None = None,
        hops: int | None = None,
        surfaces: Sequence[str] | None = None,
        themes: Sequence[str] | None = None,
    ) -> A:
        """The facts, reports and passages that answer `question`."""
        body = fields(
            question=question,
            data_subject_id=data_subject_id or None,
            as_of=as_of,
            as_known_at=as_known_at,
            max_characters=max_characters,
            source_roles=None if source_roles is None else list(source_roles),
            hops=hops,
            surfaces=None if surfaces is None else list(surfaces),
            themes=None if themes is None else list(themes),
        )
        return self._run(_post("/v1/recalls", body))

    def context(self, *, data_subject_id: str, max_characters: int | None = None) -> A:
        """A person's recent turns and segment summaries, ready to put before a model."""
        body = fields(data_subject_id=data_subject_id or None, max_characters=max_characters)
        return self._run(_post("/v1/contexts", body))

    def resolve_citation(
        self, *, id: str, after: Body | None = None, limit: int | None = None
    ) -> A:
        """A fact's record and a page of the quotes it rests on; `after` is the last `next`."""
        return self._run(_post("/v1/citations/resolve", fields(id=id, after=after, limit=limit)))

    def get_message(
        self,
        *,
        chunk_id: str,
        byte_start: int | None = None,
        byte_limit: int | None = None,
        expected_digest: str | None = None,
    ) -> A:
        """A window of one stored message's words (`chunk_id` from a passage)."""
        body = fields(
            chunk_id=chunk_id,
            byte_start=byte_start,
            byte_limit=byte_limit,
            expected_digest=expected_digest,
        )
        return self._run(_post("/v1/messages/get", body))

    def search_passages(
        self,
        *,
        question: str,
        data_subject_id: str | None = None,
        limit: int | None = None,
        candidates: int | None = None,
        source_role: str | None = None,
    ) -> A:
        """Stored messages that match `question`, by text and by meaning."""
        body = fields(
            question=question,
            data_subject_id=data_subject_id or None,
            limit=limit,
            candidates=candidates,
            source_role=source_role,
        )
        return self._run(_post("/v1/passages/search", body))

    # ---- records ------------------------------------------------------------------------------

    def assert_records(self, records: Sequence[Body]) -> A:
        """Author cited records; a record with no `idempotency_key` gets one made for it."""
        return self._run(_post("/v1/records/assert", {"records": keyed(records)}))

    def correct_records(self, records: Sequence[Body]) -> A:
        """Replace records' objects (`id`, `expected_version`, `object`, `statement`, ...)."""
        return self._run(_post("/v1/records/correct", {"records": [dict(r) for r in records]}))

    def retract_records(self, records: Sequence[Body]) -> A:
        """Withdraw records (`id`, `expected_version`)."""
        return self._run(_post("/v1/records/retract", {"records": [dict(r) for r in records]}))

    def list_records(
        self,
        *,
        data_subject_id: str | None = None,
        after: Body | None = None,
        limit: int | None = None,
    ) -> A:
        """A page of the project's records; `after` is the previous page's `next`."""
        body = fields(data_subject_id=data_subject_id, after=after, limit=limit)
        return self._run(_post("/v1/records/list", body))

    def record_history(self, *, id: str, before: Body | None = None, limit: int | None = None) -> A:
        """A record's current times and a page of its earlier versions."""
        return self._run(_post("/v1/records/history", fields(id=id, before=before, limit=limit)))

    # ---- artifacts ----------------------------------------------------------------------------

    def put_artifact(
        self,
        *,
        id: str,
        data_subject_id: str,
        kind: str,
        content: bytes,
        name: str | None = None,
        expected_version: str | None = None,
    ) -> A:
        """Write an artifact (`content` is sent base64-encoded); new without `expected_version`."""
        body = fields(
            id=id,
            expected_version=expected_version,
            data_subject_id=data_subject_id,
            kind=kind,
            name=name,
            content=base64.b64encode(content).decode("ascii"),
        )
        return self._run(_post("/v1/artifacts/put", body))

    def get_artifact(self, *, id: str, data_subject_id: str | None = None) -> A:
        """An artifact with its content (base64, as the wire carries it)."""
        body = fields(id=id, data_subject_id=data_subject_id)
        return self._run(_post("/v1/artifacts/get", body))

    def list_artifacts(
        self,
        *,
        kind: str | None = None,
        name_prefix: str | None = None,
        data_subject_id: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> A:
        """A page of artifacts' metadata; `after` is the previous page's `next.id`."""
        body = fields(
            kind=kind,
            name_prefix=name_prefix,
            data_subject_id=data_subject_id,
            after=after,
            limit=limit,
        )
        return self._run(_post("/v1/artifacts/list", body))

    def delete_artifact(
        self, *, id: str, expected_version: str, data_subject_id: str | None = None
    ) -> A:
        """Delete an artifact at the version the caller last saw."""
        body = fields(id=id, expected_version=expected_version, data_subject_id=data_subject_id)
        return self._run(_post("/v1/artifacts/delete", body))

    # ---- subjects -----------------------------------------------------------------------------

    def register_subject(
        self,
        *,
        idempotency_key: str | None = None,
        external_reference: str | None = None,
        label: str | None = None,
    ) -> A:
        """Register a data subject. With no key, one is made for the retries."""
        body = fields(
            idempotency_key=idempotency_key or new_key(),
            external_reference=external_reference,
            label=label,
        )
        return self._run(_post("/v1/subjects/register", body))

    def get_subject(self, *, id: str | None = None, external_reference: str | None = None) -> A:
        """A registered subject, by exactly one of its id or your external reference."""
        body = fields(id=id, external_reference=external_reference)
        return self._run(_post("/v1/subjects/get", body))

    def list_subjects(self, *, after: str | None = None, limit: int | None = None) -> A:
        """A page of registered subjects; `after` is the previous page's `next.id`."""
        return self._run(_post("/v1/subjects/list", fields(after=after, limit=limit)))

    def update_subject(
        self,
        *,
        id: str,
        expected_version: str,
        external_reference: str | None = None,
        label: str | None = None,
    ) -> A:
        """Change a subject's reference or label at the version the caller last saw."""
        body = fields(
            id=id,
            expected_version=expected_version,
            external_reference=external_reference,
            label=label,
        )
        return self._run(_post("/v1/subjects/update", body))

    # ---- erasure and export -------------------------------------------------------------------

    def erase(
        self,
        *,
        data_subject_id: str | None = None,
        source_observation_ids: Sequence[str] | None = None,
        reason: str | None = None,
    ) -> A:
        """Erase a person, or some turns, and everything formed from them; a receipt answers."""
        body = fields(
            data_subject_id=data_subject_id,
            source_observation_ids=(
                None if source_observation_ids is None else list(source_observation_ids)
            ),
            reason=reason,
        )
        return self._run(_post("/v1/erasures", body))

    def export(
        self,
        *,
        data_subject_id: str | None = None,
        source_observation_ids: Sequence[str] | None = None,
    ) -> A:
        """Everything held about a person (or some turns), by section."""
        body = fields(
            data_subject_id=data_subject_id,
            source_observation_ids=(
                None if source_observation_ids is None else list(source_observation_ids)
            ),
        )
        return self._run(_post("/v1/exports", body))

    # ---- entities and report candidates -------------------------------------------------------

    def list_entities(self, *, after: Body | None = None, limit: int | None = None) -> A:
        """A page of the project's entities; `after` is the previous page's `next`."""
        return self._run(_post("/v1/entities/list", fields(after=after, limit=limit)))

    def get_entity(self, *, id: str) -> A:
        """One entity: canonical name, aliases, identity kind."""
        return self._run(_post("/v1/entities/get", {"id": id}))

    def entity_candidates(
        self, *, question: str, limit: int | None = None, candidates: int | None = None
    ) -> A:
        """Entities whose names are near the words of `question`."""
        body = fields(question=question, limit=limit, candidates=candidates)
        return self._run(_post("/v1/entities/candidates", body))

    def purge_entity(self, *, id: str, reason: str | None = None, confirm: bool | None = None) -> A:
        """Preview removing an entity and what rests on it; `confirm=True` removes it."""
        body = fields(id=id, reason=reason, confirm=confirm)
        return self._run(_post("/v1/entities/purge", body))

    def report_candidates(
        self, *, question: str, limit: int | None = None, candidates: int | None = None
    ) -> A:
        """Reports whose meaning is near `question`."""
        body = fields(question=question, limit=limit, candidates=candidates)
        return self._run(_post("/v1/reports/candidates", body))

    # ---- feedback -----------------------------------------------------------------------------

    def record_feedback(
        self, *, record_id: str, note: str, proposed_object: str | None = None
    ) -> A:
        """Flag a record as wrong, changing nothing. Not repeatable: each call is a new report."""
        body = fields(record_id=record_id, note=note, proposed_object=proposed_object)
        return self._run(_post("/v1/feedback/record", body, repeatable=False))

    def list_feedback(
        self,
        *,
        record_id: str | None = None,
        open_only: bool | None = None,
        limit: int | None = None,
        after: Body | None = None,
    ) -> A:
        """A page of feedback reports; `after` is the previous page's `next`."""
        body = fields(record_id=record_id, open_only=open_only, limit=limit, after=after)
        return self._run(_post("/v1/feedback/list", body))

    def promote_feedback(self, *, id: str, expected_version: str) -> A:
        """Turn a report into a correction or retraction of its record at `expected_version`."""
        body = {"id": id, "expected_version": expected_version}
        return self._run(_post("/v1/feedback/promote", body))

    # ---- notifications ------------------------------------------------------------------------

    def register_notification_endpoint(self, *, url: str) -> A:
        """Register a webhook; its `secret` is shown once. Not repeatable: each is a new one."""
        return self._run(
            _post("/v1/notifications/endpoints/register", {"url": url}, repeatable=False)
        )

    def list_notification_endpoints(self) -> A:
        return self._run(_post("/v1/notifications/endpoints/list", {}))

    def disable_notification_endpoint(self, *, id: str) -> A:
        return self._run(_post("/v1/notifications/endpoints/disable", {"id": id}))

    def list_notification_deliveries(self, *, limit: int | None = None) -> A:
        return self._run(_post("/v1/notifications/deliveries/list", fields(limit=limit)))
