"""Neutrino: a front server for LLM inference engines."""

__version__ = "0.1.0"
