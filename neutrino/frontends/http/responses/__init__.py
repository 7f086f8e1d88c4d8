"""OpenAI's Responses API: items and parse (input items and body into the typed request),
render, stream, store (finished responses, optional), routes.
"""
