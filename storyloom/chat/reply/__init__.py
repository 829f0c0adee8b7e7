"""What the model writes back (seed 001 §2): Filament's streaming tag parser and the state
operations a reply asks for, in each notation cards use."""
