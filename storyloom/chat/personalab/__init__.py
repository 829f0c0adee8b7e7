"""PersonaLab (seed 004): the library of character, background and summary presets, the
director, summarise-and-continue, memory updates and PersonaLab's export."""
