"""The local web server: REST under /api, the WebSocket protocol at /ws, the web app at /."""
