"""mock_ie: a mock inference engine speaking Neutrino's engine protocol (schemas/ie.capnp)."""
