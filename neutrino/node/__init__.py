"""``neutrino node``: the node agent, one per host.

It discovers the host and its GPUs (``hostinfo``, ``gpu``), runs inference engines
("harnesses", ``harness``) as one process per model (``process``), loads and unloads
models from its models folder within a memory budget (``table``), and answers the front
server's polls and calls over an HTTP API behind a bearer token (``server``). The
front server, the control plane, learns the fleet from these agents (``neutrino.fleet``).
"""
