"""Pure core: spec → rules → plan → launch spec. No I/O beyond reading packaged catalog data."""
