"""The bottom layer: ids, errors, atomic file io, settings, event types."""
