"""Load generation: the test_client load generator and its protocol clients."""
