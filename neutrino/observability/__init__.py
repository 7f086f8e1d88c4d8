"""What Neutrino tells operators about itself: process figures, counters, rate-limited logs."""
