"""Rebuilding facts under the current extraction setup, run by the operator's command: one source,
or a project job a bounded number of sources per run, each source asked of the model first and
then published in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from satchel.memory.config import ModelClientSettings
from satchel.memory.domain import Extractor
from satchel.memory.formation.extraction import CODE_VERSION, PROMPT_ID
from satchel.memory.formation.model import ChatModel, ModelError
from satchel.memory.formation.worker import extract
from satchel.memory.service.rebuilds import Published, RebuildRefused, begin, publish
from satchel.memory.store import formation, rebuilds
from satchel.memory.store import retention as projects
from satchel.memory.store.database import Conn
from satchel.memory.store.rebuilds import Job, Source

DEFAULT_LIMIT = 10
MAX_LIMIT = 100

Progress = Callable[[Job], None]  # told after every source a run finishes with


@dataclass(frozen=True, slots=True)
class SourceRebuilt:
    """What `rebuild facts` did: the source, whether its result was replayed, and the counts."""

    source_observation_id: uuid.UUID
    generation_id: uuid.UUID
    extractor_version: str
    facts_admitted: int
    facts_retired: int
    replayed: bool


def extractor_of(settings: ModelClientSettings) -> Extractor:
    """The extraction setup a rebuild forms under: the model, the prompt and the code."""
    return Extractor(settings.model, PROMPT_ID, CODE_VERSION)


async def _project_id(conn: Conn, project: str) -> int:
    project_id = await projects.project_id(conn, project)
    if project_id is None:
        raise RebuildRefused(f"no project is named {project!r}: see satchel tokens list")
    return project_id


async def _form(
    conn: Conn,
    model: ChatModel,
    project_id: int,
    key: uuid.UUID,
    source: Source,
    extractor: Extractor,
) -> Published:
    """Re-form one source: a generation the key already published is replayed with no model
    call; otherwise the model is asked, then the result published."""
    done = await rebuilds.generation(conn, project_id, key, source.id)
    if done is not None:
        return Published(done, replayed=True)
    messages = await formation.messages_of(conn, source.id)
    outcome = await extract(model, messages, await formation.vocabulary(conn))
    return await publish(conn, project_id, key, source, outcome, extractor)


async def rebuild_source(
    url: str, settings: ModelClientSettings, project: str, source_id: uuid.UUID, key: uuid.UUID
) -> SourceRebuilt:
    """Re-form one stored turn of `project` under the current setup (see `_form`)."""
    extractor = extractor_of(settings)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        project_id = await _project_id(conn, project)
        if await rebuilds.job(conn, project_id, key) is not None:
            raise RebuildRefused(f"key {key} names a project rebuild: choose another key")
        used = set(await rebuilds.key_sources(conn, project_id, key)) - {source_id}
        if used:
            raise RebuildRefused(f"key {key} rebuilt another source: choose another key")
        source = await rebuilds.source(conn, project_id, source_id)
        if source is None:
            raise RebuildRefused(
                f"project {project!r} has no stored turn {source_id} (unknown or erased)"
            )
        if source.kind != "turn":
            raise RebuildRefused(
                f"source {source_id} is {source.kind} input, never formed by a model: nothing"
                " to rebuild"
            )
        if not source.formed:
            raise RebuildRefused(
                f"source {source_id} is not formed yet (or parked): the worker forms it under"
                " the current setup"
            )
        model = ChatModel(settings)
        try:
            published = await _form(conn, model, project_id, key, source, extractor)
        except ModelError as exc:
            raise RebuildRefused(f"the model failed, nothing was published: {exc}") from None
        finally:
            await model.aclose()
    found = published.generation
    if found is None:
        raise RebuildRefused(f"source {source_id} was erased while it was rebuilt")
    return SourceRebuilt(
        source_id,
        found.id,
        found.extractor_version,
        found.facts_admitted,
        found.facts_retired,
        published.replayed,
    )


async def rebuild_project(
    url: str,
    settings: ModelClientSettings,
    project: str,
    key: uuid.UUID,
    limit: int,
    progress: Progress | None = None,
) -> Job:
    """Run the project's rebuild job `key` (begun now when new) over up to `limit` more sources;
    it completes once its cursor reaches where the log ended when it began. One runner at a time
    per project; a cancel requested meanwhile ends it after the source at hand."""
    if not 1 <= limit <= MAX_LIMIT:
        raise RebuildRefused(f"--limit must be 1 to {MAX_LIMIT}, not {limit}")
    extractor = extractor_of(settings)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        project_id = await _project_id(conn, project)
        job = await begin(conn, project_id, key, extractor.version())
        if job.status != "active":
            return job
        if not await rebuilds.try_lock_job(conn, project_id):
            raise RebuildRefused(f"another run of rebuild {key} is going on: wait for it")
        model = ChatModel(settings)
        try:
            await _run(conn, model, project_id, job, extractor, limit, progress)
        finally:
            await model.aclose()
            await rebuilds.unlock_job(conn, project_id)
        final = await rebuilds.job(conn, project_id, key)
    assert final is not None
    return final


async def _run(
    conn: Conn,
    model: ChatModel,
    project_id: int,
    job: Job,
    extractor: Extractor,
    limit: int,
    progress: Progress | None,
) -> None:
    through = -1 if job.through_offset is None else job.through_offset
    sources = await rebuilds.sources_after(conn, project_id, job.after_offset, through, limit)
    for source in sources:
        current = await rebuilds.job(conn, project_id, job.rebuild_key)
        if current is None or current.cancel_requested:
            break
        rebuilt = skipped = 0
        if source.kind == "turn" and source.formed:
            try:
                published = await _form(conn, model, project_id, job.rebuild_key, source, extractor)
            except ModelError as exc:
                raise RebuildRefused(
                    f"the model failed at log offset {source.log_offset}, nothing of it was"
                    f" published: {exc}; run the same command again to go on"
                ) from None
            rebuilt, skipped = (1, 0) if published.generation else (0, 1)
        else:
            skipped = 1
        await rebuilds.advance(conn, job.id, source.log_offset, rebuilt=rebuilt, skipped=skipped)
        if progress is not None:
            now = await rebuilds.job(conn, project_id, job.rebuild_key)
            assert now is not None
            progress(now)
    current = await rebuilds.job(conn, project_id, job.rebuild_key)
    assert current is not None
    if current.cancel_requested:
        await rebuilds.finish(conn, job.id, "cancelled")
    elif not await rebuilds.sources_after(conn, project_id, current.after_offset, through, 1):
        await rebuilds.finish(conn, job.id, "completed")


async def status(url: str, project: str, key: uuid.UUID | None) -> Job:
    """The project's job `key`, or (with no key) its active job, else its latest one."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        project_id = await _project_id(conn, project)
        if key is not None:
            found = await rebuilds.job(conn, project_id, key)
        else:
            found = await rebuilds.active_job(conn, project_id) or await rebuilds.latest_job(
                conn, project_id
            )
    if found is None:
        which = f"rebuild {key}" if key else "rebuild"
        raise RebuildRefused(f"project {project!r} has no {which}: see satchel rebuild project")
    return found


async def cancel(url: str, project: str, key: uuid.UUID) -> Job:
    """Ask the project's active job `key` to stop; when no runner holds it, it is cancelled now
    (no model needed). A finished job is left as it was."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        project_id = await _project_id(conn, project)
        found = await rebuilds.job(conn, project_id, key)
        if found is None:
            raise RebuildRefused(f"project {project!r} has no rebuild {key}")
        if found.status == "active":
            await rebuilds.request_cancel(conn, found.id)
            if await rebuilds.try_lock_job(conn, project_id):
                await rebuilds.finish(conn, found.id, "cancelled")
                await rebuilds.unlock_job(conn, project_id)
        final = await rebuilds.job(conn, project_id, key)
    assert final is not None
    return final
