"""Telling the user a card waits: Web Push to the paired phone, and operator channels.

``notice`` builds what is told (pure: a plain summary, never a nonce, a token or the full
arguments, since every channel passes through third parties); ``webpush``, ``webhook`` and
``mail`` send it; ``dispatch`` hears the gate's news, spots cards about to expire, and sends
without ever holding up or failing the gate; ``vapid`` keeps the server's Web Push key.
"""
