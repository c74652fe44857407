"""Graphs of ops: build with symbols, compile once, replay with new inputs."""
