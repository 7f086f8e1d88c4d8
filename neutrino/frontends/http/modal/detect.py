"""``POST /v1/detect``: object detection on one image (Neutrino's own endpoint; OpenAI has
none). Body: ``{"model", "image": data URI, "threshold"}``; answer: the boxes found, in
pixels with a top-left origin."""

from __future__ import annotations

from aiohttp import web

from neutrino.errors import bad_request
from neutrino.frontends.common import new_id
from neutrino.frontends.http.exchange import json_response, read_json
from neutrino.frontends.http.guard import caller
from neutrino.frontends.http.modal import answered
from neutrino.frontends.http.routes import AiohttpHandler, RouteGroup
from neutrino.pipeline import modal_rules as rules
from neutrino.pipeline.images import decode_image_url


class DetectRoutes(RouteGroup):
    def aiohttp_routes(self) -> list[tuple[str, str, AiohttpHandler]]:
        return [
            ("POST", "/v1/detect", self.detect),
        ]

    async def detect(self, request: web.Request) -> web.StreamResponse:
        principal = caller(self.orch.keys, request)
        body = await read_json(request, self.cfg.limits)
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        model = rules.model_name(body.get("model"))
        url = body.get("image")
        if isinstance(url, dict):
            url = url.get("url")
        if not isinstance(url, str):
            raise bad_request("image must be a data URI", "image")
        image = decode_image_url(url, ("image",))
        traceparent = request.headers.get("traceparent", "")
        job = rules.detect(model, image, body.get("threshold"), traceparent)
        rid = new_id("det")
        _, result = await answered(self.orch, request, job, principal, rid)
        boxes = job.boxes(result)
        data: list[dict[str, object]] = [
            {"label": b.label, "score": b.score, "box": [b.x0, b.y0, b.x1, b.y1]} for b in boxes
        ]
        return json_response(
            {
                "id": rid,
                "object": "list",
                "model": model,
                "image": {"width": image.width, "height": image.height},
                "data": data,
            }
        )
