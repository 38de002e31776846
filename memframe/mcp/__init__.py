"""`memframe mcp`'s server: tools without an `mcp` import (`tools`) and the stdio server (`server`)."""
