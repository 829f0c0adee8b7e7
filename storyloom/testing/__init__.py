"""Tools for trying storyloom without a model and for its tests: a scripted
OpenAI-compatible server and small SillyTavern documents built in code.

Nothing in the runtime imports this package.
"""
