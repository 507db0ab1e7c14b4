"""Fixtures for embedding tests: loopback fake APIs and a hand-moved clock."""

from tests.fakes.fixtures import clock, fake_gemini, fake_openai

__all__ = ["clock", "fake_gemini", "fake_openai"]
