"""Routing across engines: the router (the real EngineClient), the routing policies
(routing.py, sans-IO), failing replicas kept out of the way and retries before the first
token (failover.py), answers moved after it (migration.py), where a failed attempt goes
next (resend.py), and models loaded on demand (lifecycle.py).
"""
