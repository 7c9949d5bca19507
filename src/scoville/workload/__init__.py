"""What is sent: synthetic scenarios, sessions and traces, all as Session lists."""
