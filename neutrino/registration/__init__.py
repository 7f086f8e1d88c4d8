"""Registration: telling a load balancer (Sombrero) and etcd that this instance exists,
what it serves and how loaded it is, and taking it back on drain.

The app builds the record and the load through a :class:`Source`, starts a
:class:`SombreroRegistrar` (``[sombrero] address``) and an :class:`EtcdRegistrar`
(``[discovery] etcd``), calls their ``deregister`` first on drain and ``stop`` at exit.
:class:`QueueEstimator` gives the load report's estimated wait.
"""
