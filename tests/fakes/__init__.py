"""Loopback fakes of the remote APIs Engram talks to, shared by the tests."""
