"""LLM providers behind one interface (see :mod:`engram_api.llm.base`); used by maintenance only."""
