"""The chat engine: turn tree, state chain, Filament, the Skein pipeline, PersonaLab."""
