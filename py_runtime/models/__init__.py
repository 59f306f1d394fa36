"""Models: their geometry (config), and, as they land, weights, route policy and the decoder graph."""
