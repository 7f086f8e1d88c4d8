"""The engine protocol on the wire: ``schemas/ie.capnp`` loaded once (schema.py), frames
and their stream framing (framing.py), the codec between frames and ``messages`` objects
(codec.py, driven by one table per message type), and the hand-written fast builder and
reader of the hot messages (builder.py, reader.py) over packed arrays (arrays.py)."""
