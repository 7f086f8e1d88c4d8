"""The control plane: Neutrino learns its fleet of node agents (``neutrino node``) and
places the catalogue's models on them.

- ``agents``: the HTTP client of one agent's API;
- ``topology``: what is known of every node (up or down, its host, devices, free memory,
  the models it holds), sans-IO, fed by polls;
- ``placement``: the rules, sans-IO: which node a model fits, what to evict where;
- ``plane``: the asyncio adapter that polls, loads, evicts, keeps replicas and hands
  each placed engine to the router as a pool of its own.
"""
