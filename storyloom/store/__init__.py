"""Storage: one SQLite database (WAL) in the data directory, with sqlite-vec loaded."""
