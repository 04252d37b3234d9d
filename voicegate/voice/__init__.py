"""The voice path: audio intake → replay fingerprint → transcript → consent decision.

``audio`` turns uploaded bytes into a checked 16 kHz mono clip, ``fingerprint`` refuses a
recording that was used before, ``transcribe`` runs the recogniser, ``consent`` maps the words to
a decision and ``pipeline`` ties them together.
"""
