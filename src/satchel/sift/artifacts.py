"""The artifact store: full tool outputs that receipts and bounded results point to.

The newest artifacts are kept in memory; with a directory, every artifact is also written to a file
there, so a relaunched agent can still read them. Each tier is capped in characters and drops its
oldest artifacts first.
"""

import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".artifact"


@dataclass(frozen=True, slots=True)
class Artifact:
    """One full tool output."""

    id: str
    tool: str
    hint: str
    """The short argument hint of the call that produced it."""
    text: str


@dataclass(frozen=True, slots=True)
class ArtifactInfo:
    """What the store lists about an artifact without reading it."""

    id: str
    tool: str
    hint: str
    chars: int


class ArtifactStore:
    """Artifacts by id, oldest first; `put` is idempotent per id."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        memory_chars: int = 4_000_000,
        file_chars: int = 64_000_000,
    ) -> None:
        if memory_chars < 0 or file_chars < 0:
            raise ValueError("artifact store caps must not be negative")
        self.directory = Path(directory) if directory is not None else None
        self.memory_chars = memory_chars
        self.file_chars = file_chars
        self._memory: OrderedDict[str, Artifact] = OrderedDict()
        self._memory_size = 0
        self._index: OrderedDict[str, ArtifactInfo] = OrderedDict()
        self._files_size = 0
        self._seq = 0
        self._lock = threading.Lock()
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._load_index()

    def put(self, artifact: Artifact) -> None:
        """Store an artifact; an id already stored keeps its first artifact."""
        with self._lock:
            if artifact.id in self._index:
                return
            info = ArtifactInfo(artifact.id, artifact.tool, artifact.hint, len(artifact.text))
            if self.directory is not None:
                self._write(artifact)
                self._files_size += info.chars
            self._index[artifact.id] = info
            self._memory[artifact.id] = artifact
            self._memory_size += info.chars
            self._enforce_caps()

    def get(self, artifact_id: str) -> Artifact | None:
        """The artifact with this id, or None when it was never stored or has been dropped."""
        with self._lock:
            found = self._memory.get(artifact_id)
            if found is not None or artifact_id not in self._index:
                return found
        return self._read(artifact_id)

    def __contains__(self, artifact_id: object) -> bool:
        return artifact_id in self._index

    def infos(self) -> list[ArtifactInfo]:
        """Every stored artifact, oldest first."""
        with self._lock:
            return list(self._index.values())

    def _enforce_caps(self) -> None:
        while self._memory_size > self.memory_chars and len(self._memory) > 1:
            old_id, old = self._memory.popitem(last=False)
            self._memory_size -= len(old.text)
            if self.directory is None:
                del self._index[old_id]
        if self.directory is None:
            return
        while self._files_size > self.file_chars and len(self._index) > 1:
            old_id, info = self._index.popitem(last=False)
            self._files_size -= info.chars
            self._path(old_id).unlink(missing_ok=True)
            dropped = self._memory.pop(old_id, None)
            if dropped is not None:
                self._memory_size -= len(dropped.text)

    def _path(self, artifact_id: str) -> Path:
        assert self.directory is not None
        digest = hashlib.sha256(artifact_id.encode()).hexdigest()[:32]
        return self.directory / f"{digest}{SUFFIX}"

    def _write(self, artifact: Artifact) -> None:
        self._seq += 1
        header = json.dumps(
            {
                "id": artifact.id,
                "tool": artifact.tool,
                "hint": artifact.hint,
                "chars": len(artifact.text),
                "seq": self._seq,
            },
            ensure_ascii=False,
        )
        path = self._path(artifact.id)
        partial = path.with_suffix(".partial")
        partial.write_text(f"{header}\n{artifact.text}", encoding="utf-8", errors="surrogatepass")
        os.replace(partial, path)

    def _read(self, artifact_id: str) -> Artifact | None:
        if self.directory is None:
            return None
        try:
            raw = self._path(artifact_id).read_text(encoding="utf-8", errors="surrogatepass")
        except FileNotFoundError:
            return None
        header, _, text = raw.partition("\n")
        meta = json.loads(header)
        return Artifact(artifact_id, str(meta["tool"]), str(meta["hint"]), text)

    def _load_index(self) -> None:
        assert self.directory is not None
        found: list[tuple[int, ArtifactInfo]] = []
        for path in self.directory.glob(f"*{SUFFIX}"):
            with path.open(encoding="utf-8", errors="surrogatepass") as handle:
                meta = json.loads(handle.readline())
            info = ArtifactInfo(
                str(meta["id"]), str(meta["tool"]), str(meta["hint"]), int(meta["chars"])
            )
            found.append((int(meta["seq"]), info))
        for seq, info in sorted(found, key=lambda item: item[0]):
            self._index[info.id] = info
            self._files_size += info.chars
            self._seq = max(self._seq, seq)
