"""The modality routes: embeddings and rerank, audio (transcription, translation, speech),
detection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from neutrino.frontends.http.guard import received_at
from neutrino.pipeline.auth import Principal

if TYPE_CHECKING:
    from neutrino.engine.messages import ModalResult
    from neutrino.pipeline.call import ModalCall
    from neutrino.pipeline.modalities import ModalJob
    from neutrino.pipeline.orchestrator import Orchestrator


async def answered(
    orch: Orchestrator,
    request: web.Request,
    job: ModalJob,
    principal: Principal | None,
    request_id: str,
) -> tuple[ModalCall, ModalResult]:
    """A one-answer job's call for ``request`` and its result (the call closed after)."""
    call = await orch.call(
        job, received_ns=received_at(request), principal=principal, request_id=request_id
    )
    try:
        return call, await call.result()
    finally:
        call.close()
