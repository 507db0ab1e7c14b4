"""Language data shared by text paths (lexical search, dedup and conflict rules)."""
