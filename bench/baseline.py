"""Baseline for `make bench`: a bare aiohttp server answering OpenAI-shaped requests.

It parses the JSON body and returns a canned chat completion, or streams one SSE
chunk per token with one write each: the floor any Python HTTP front end pays
before doing real work. Run as ``python -m bench.baseline PORT``.
"""

from __future__ import annotations

import sys
import time

import orjson
import uvloop
from aiohttp import web

WORDS = [" lorem", " ipsum", " dolor", " sit", " amet"]


async def chat(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    n = int(body.get("max_tokens", 16))
    head = {"id": "chatcmpl-x", "created": int(time.time()), "model": body["model"]}
    if not body.get("stream"):
        text = "".join(WORDS[i % 5] for i in range(n))
        return web.Response(
            body=orjson.dumps(
                {
                    **head,
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "length",
                            "logprobs": None,
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n},
                }
            ),
            content_type="application/json",
        )
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for i in range(n):
        chunk = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": WORDS[i % 5]},
                    "finish_reason": None,
                    "logprobs": None,
                }
            ],
        }
        await resp.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def models(request: web.Request) -> web.Response:
    """The model list a passthrough upstream's health read asks for."""
    return web.json_response({"object": "list", "data": [{"id": "qwen2.5-mock"}]})


def main() -> None:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    uvloop.run(
        web._run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
    )


if __name__ == "__main__":
    main()
