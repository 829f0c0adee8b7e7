"""The Jacquard prompt pipeline (seed 001 §4-5): the Skein, macros, conditions, regex
scripts, the token budget, the Weaver, and the shuttle nodes that run them as a workflow."""
