"""Host-only side of the lab (codegen, dev server, oracle, CLI). Never imported in the browser."""
