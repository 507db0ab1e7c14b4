"""Clients for remote model APIs (google-genai, openai), shared by embeddings and LLM providers.

Each module builds an SDK client with the SDK's own retries off (our chain owns retries) and
turns the SDK's exceptions into a :class:`engram_api.resilience.Failure` without secrets.
"""
