"""A webhook: each notice as one JSON object POSTed to the operator's URL.

The body is ``{"event", "pending_id", "user", "title", "summary", "deadline", "tap",
"outcome", "approve_url"}``: the same plain summary a push carries, never the nonce, a token or
the arguments. ntfy takes it with its message templates (``?tpl=1&t={{.title}}&m={{.summary}}``
on the topic URL); a chat or home-automation hook reads the fields it wants.
"""

from __future__ import annotations

import httpx

from voicegate.notify.notice import Notice

TIMEOUT = 10.0

__all__ = ["Webhook"]


class Webhook:
    """POSTs each notice to ``url``; an answer other than 2xx raises ``httpx.HTTPStatusError``."""

    name = "webhook"

    def __init__(
        self, url: str, *, approve_url: str = "", client: httpx.AsyncClient | None = None
    ) -> None:
        self.url = url
        self.approve_url = approve_url
        self.client = client or httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False)

    async def send(self, notice: Notice) -> None:
        """POST ``notice`` as JSON."""
        body = {**notice.fields(), "user": notice.user, "approve_url": self.approve_url}
        response = await self.client.post(self.url, json=body)
        response.raise_for_status()

    async def close(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()
