"""Hearing on recogniser workers over NATS JetStream: the wire format (``wire``), the shared
layout (``queue``), the gate's side (``remote``) and the worker (``worker``).
"""
