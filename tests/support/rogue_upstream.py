"""An OpenAI-compatible upstream that misbehaves, for the passthrough mode's tests.

``python -m tests.support.rogue_upstream PORT``; what it does is chosen by the last user
message's text:

- ``silent``: sends the headers of its answer, then nothing, ever;
- ``one-then-silent``: a stream's first event, then nothing;
- ``endless``: a stream whose one line never ends (``data: xxxx...`` without a newline);
- ``not-json``: a 200 whose body is HTML;
- anything else: a short, well-formed answer.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from aiohttp import web

CHUNK = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "rogue",
        "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}],
    }
)
ANSWER = {"id": "c1", "object": "chat.completion", "created": 1, "model": "rogue",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"},
                       "finish_reason": "stop"}],
          "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}  # fmt: skip


async def models(_: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "rogue", "object": "model"}]})


async def chat(request: web.Request) -> web.StreamResponse:
    body: dict[str, Any] = await request.json()
    what = str(body["messages"][-1]["content"])
    stream = body.get("stream") is True
    if what == "not-json":
        return web.Response(text="<html>502 Bad Gateway</html>", content_type="application/json")
    if what not in ("silent", "one-then-silent", "endless") and not stream:
        return web.json_response(ANSWER)
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream" if stream else "application/json"}
    )
    await resp.prepare(request)
    if what == "one-then-silent":
        await resp.write(f"data: {CHUNK}\n\n".encode())
    elif what == "endless":
        await resp.write(b"data: ")
        try:
            while True:
                await resp.write(b"x" * 65536)
        except ConnectionError:  # the relay gave up on it, as it should
            return resp
    elif what != "silent":
        await resp.write(f"data: {CHUNK}\n\ndata: [DONE]\n\n".encode())
        return resp
    await asyncio.sleep(3600)
    return resp


def main() -> None:
    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)


if __name__ == "__main__":
    main()
