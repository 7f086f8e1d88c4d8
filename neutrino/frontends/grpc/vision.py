"""The ``neutrino.v1.Vision`` servicer: ``Detect``, the gRPC twin of ``POST /v1/detect``.

The image comes as raw bytes instead of a data URI; it is checked exactly as over HTTP
(:func:`neutrino.pipeline.images.check_image`: PNG or JPEG, size and pixel limits, the
same messages) before anything reaches an engine.
"""

from __future__ import annotations

import asyncio

from neutrino.errors import bad_request
from neutrino.frontends.grpc.calls import Arrival, Context, Service
from neutrino.frontends.grpc.stubs import vision_pb2, vision_pb2_grpc
from neutrino.pipeline import modal_rules as rules
from neutrino.pipeline.images import MAX_IMAGE_BYTES, check_image
from neutrino.pipeline.modalities import Image

_OFFLOAD_BYTES = 256 * 1024  # check bigger images off the event loop


def image(data: bytes) -> Image:
    """The checked image (raises BAD_REQUEST naming ``image``)."""
    if len(data) > MAX_IMAGE_BYTES:
        raise bad_request(f"an image may be at most {MAX_IMAGE_BYTES} bytes", "image")
    return check_image(data, ("image",))


def threshold(msg: vision_pb2.DetectRequest) -> float | None:
    return float(msg.threshold) if msg.HasField("threshold") else None


class VisionService(Service, vision_pb2_grpc.VisionServicer):
    async def Detect(
        self, request: vision_pb2.DetectRequest, context: Context
    ) -> vision_pb2.DetectResponse | None:
        async def run(arrival: Arrival) -> vision_pb2.DetectResponse:
            name = rules.model_name(request.model)
            data = request.image
            if len(data) > _OFFLOAD_BYTES:
                img = await asyncio.to_thread(image, data)
            else:
                img = image(data)
            job = rules.detect(name, img, threshold(request), arrival.traceparent)
            call, result = await self.answer(job, "det", context, arrival)
            boxes = job.boxes(result)
            return vision_pb2.DetectResponse(
                id=call.request_id,
                model=name,
                created=call.created,
                image=vision_pb2.ImageSize(width=img.width, height=img.height),
                boxes=[
                    vision_pb2.DetectBox(
                        label=b.label, score=b.score, x0=b.x0, y0=b.y0, x1=b.x1, y1=b.y1
                    )
                    for b in boxes
                ],
            )

        return await self.guarded(context, "Detect", "detect", run)
