"""The web layer: the FastAPI app and the /approve page."""
