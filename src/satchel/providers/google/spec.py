"""The spec of `google.interactions.v1`: descriptor, request settings, factory."""

from __future__ import annotations

from typing import Any

from satchel.providers.google.adapter import DESCRIPTOR, GoogleInteractionsAdapter
from satchel.providers.google.settings import InteractionsSettings
from satchel.providers.kit.sdk import google_client
from satchel.providers.kit.spec import AdapterProfile, AdapterSpec
from satchel.turns import ProviderAdapter


def _google_interactions(
    profile: AdapterProfile, http_client: Any, api_key: str
) -> ProviderAdapter:
    return GoogleInteractionsAdapter(
        google_client(profile, http_client, api_key),
        profile.request,
        summary_max_tokens=profile.runtime.compaction.summary_max_output_tokens,
    )


GOOGLE_INTERACTIONS = AdapterSpec(DESCRIPTOR, InteractionsSettings, _google_interactions)
