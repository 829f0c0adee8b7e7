"""SillyTavern's file formats as models: world info, character cards (PNG, JSON, CHARX),
chat logs and chat-completion presets.

Reading and writing only; what these files become in storyloom (knowledge bases,
conversations, pipelines) is decided by ``knowledge/`` and ``chat/``.
"""
