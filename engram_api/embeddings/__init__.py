"""Embedding providers behind one interface (see :mod:`engram_api.embeddings.base`)."""
