"""Pending card sets, the confirm checks and receipts."""
