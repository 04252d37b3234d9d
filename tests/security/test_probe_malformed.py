"""Malformed requests on a real socket: each is refused with a 4xx (or the connection closed by
the HTTP parser), none is a server error, and the server answers the next client normally."""

from __future__ import annotations

import pytest

from tests.security.probe import served, status_of

# Each reply then ends the connection, so reading to its end takes no keep-alive wait.
HOST = b"Host: 127.0.0.1\r\nConnection: close\r\n"
MALFORMED: list[bytes] = [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/9.9\r\n" + HOST + b"\r\n",
    b"GET /device/pending HTTP/1.1\r\n\r\n",  # no Host at all
    b"POST /device/tap HTTP/1.1\r\n" + HOST + b"Content-Length: -5\r\n\r\n",
    b"POST /device/tap HTTP/1.1\r\n"
    + HOST
    + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nabcde",
    b"POST /device/tap HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
    b"POST /device/tap HTTP/1.1\r\n" + HOST + b'Content-Length: 7\r\n\r\n{"a":\xff}',
    b"POST /device/tap HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
    b"Content-Length: 4\r\n\r\nnull",
    b"POST /device/pair HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
    b'Content-Length: 14\r\n\r\n{"code":[1,2]}',
    b"GET /approve/..%2f..%2fetc%2fpasswd HTTP/1.1\r\n" + HOST + b"\r\n",
    b"GET /device/pending HTTP/1.1\r\n" + HOST + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n",
    b"BREW /device/voice HTTP/1.1\r\n" + HOST + b"\r\n",
    b"POST /device/voice HTTP/1.1\r\n" + HOST + b"Content-Type: multipart/form-data; "
    b"boundary=x\r\nContent-Length: 17\r\n\r\n--x\r\nbroken\r\n\r\n--",
    b"GET /device/pending?\xff\xfe HTTP/1.1\r\n" + HOST + b"\r\n",
]


@pytest.mark.slow
@pytest.mark.parametrize("request_bytes", MALFORMED, ids=[str(i) for i in range(len(MALFORMED))])
async def test_a_malformed_request_on_a_real_socket_is_never_a_server_error(
    request_bytes: bytes,
) -> None:
    async with served() as probe:
        reply = await probe.raw(request_bytes)
        if reply:  # the parser may also just close the connection
            assert 400 <= status_of(reply) < 500, reply[:200]
        assert (await probe.http.get("/healthz")).status_code == 200
