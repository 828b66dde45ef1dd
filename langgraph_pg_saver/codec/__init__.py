"""How stored values are encoded: encryption bound to a value's place, compression."""
