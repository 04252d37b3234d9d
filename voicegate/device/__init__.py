"""Paired devices: pairing codes, signed requests and the device HTTP API."""
