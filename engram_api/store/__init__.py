"""Vector stores behind one interface: qdrant-edge embedded (default) and qdrant-client."""
