"""OpenAI's chat and text completions: parse (the body into the typed request), render
(answers, chunks, SSE framing and errors), pieces (a large answer rendered a piece at a
time), routes.
"""
