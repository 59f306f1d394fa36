"""One module per op family: how an op picks its kernel, sizes its grid and packs its params."""
