"""Anthropic's Messages API: parse, render, stream (the push target of a streamed message),
routes.
"""
