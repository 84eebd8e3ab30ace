"""`build_session(profile)`: the one place a profile becomes a `Session`.

A run (`satchel run`) and user code build their sessions here, so a profile means the same thing
in both: its adapter, its retry policy (`agent.MAX_RETRIES`), its prices, and the compactor its
`runtime.compaction` names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from satchel.compaction import HarnessSummaryCompactor, HarnessSummaryPolicy, NativeCompactionPolicy
from satchel.providers import Profile, build_adapter
from satchel.turns import (
    Compactor,
    ConfigurationError,
    ProviderAdapter,
    RecordsWriter,
    Session,
    SummaryCompactionAdapter,
)


def build_compactor(
    profile: Profile,
    adapter: ProviderAdapter,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Compactor | None:
    """The compactor `profile.runtime.compaction` names for `adapter`, or None for `none`."""
    compaction = profile.runtime.compaction
    if compaction.strategy == "none":
        return None
    if compaction.strategy == "harness_summary":
        if compaction.trigger_tokens is None or not isinstance(adapter, SummaryCompactionAdapter):
            raise ConfigurationError(
                "runtime.compaction.strategy: harness_summary needs trigger_tokens and an "
                f"adapter that can be summarized ({adapter.descriptor.adapter_id} given)"
            )
        policy = HarnessSummaryPolicy(
            trigger_tokens=compaction.trigger_tokens,
            max_context_tokens=profile.agent.MAX_CONTEXT_LENGTH,
            summary_max_tokens=compaction.summary_max_output_tokens,
            summary_input_headroom_tokens=compaction.summary_input_headroom_tokens,
            max_attempts=compaction.max_summary_attempts,
        )
        return HarnessSummaryCompactor(adapter, policy, sleep=sleep)
    if "native" not in adapter.descriptor.compaction or compaction.trigger_tokens is None:
        raise ConfigurationError(
            "runtime.compaction.strategy: native compaction needs trigger_tokens and an adapter "
            f"that compacts natively ({adapter.descriptor.adapter_id} given)"
        )
    return NativeCompactionPolicy(
        compaction.trigger_tokens,
        profile.agent.MAX_CONTEXT_LENGTH,
        summary_max_tokens=getattr(adapter, "summary_max_tokens", None),
    )


def build_session(
    profile: Profile,
    *,
    run_dir: str | Path | None = None,
    http_client: Any = None,
    env: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Session:
    """A `Session` for `profile`: adapter (key from `client.api_key_env` in `env`), retry
    policy, compactor, prices; with `run_dir`, its step, compaction and run records are
    written there (redacted, the adapter's opaque fields included).

    `http_client` (an `httpx.Client`) replaces the SDK's transport, as tests do.
    """
    adapter = build_adapter(profile, http_client=http_client, env=env)
    records = RecordsWriter(run_dir, adapter.opaque_fields) if run_dir is not None else None
    return Session(
        adapter,
        policy=profile.retry_policy(),
        compactor=build_compactor(profile, adapter, sleep=sleep),
        records=records,
        pricing=profile.prices(),
        sleep=sleep,
    )
