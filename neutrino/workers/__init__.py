"""``--workers N``: N processes serving the same listeners, under one supervisor.

``policy``: when a dead worker is started again, and when to give up (sans-IO).
``ports``: the listeners' ports, reserved by the supervisor so that workers share them.
``supervisor``: the parent process (starts, restarts and signals the workers).
``peers``: a worker's side (its private socket, and what it gathers from the others).
``tallies``: the metrics of workers that died, kept so that merged counters never go back.
"""
