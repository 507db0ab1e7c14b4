"""The MCP service: tools over streamable HTTP (``engram serve``) and stdio (``engram stdio``)."""
