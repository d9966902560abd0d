"""The Host names a server answers to, and the check that refuses others (DNS rebinding)."""

from __future__ import annotations

import socket

from fastapi.responses import JSONResponse

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})


def allowed_hosts_for(host: str, extra: list[str] | tuple[str, ...] = ()) -> frozenset[str]:
    """The Host names a server bound to `host` answers to: the address itself, the loopback names
    for a loopback binding, and for all interfaces the machine's own names and addresses; plus
    `extra` (a public name behind a proxy; "*" answers any, as before this check)."""
    names = {host.strip("[]").lower()} | {name.strip("[]").lower() for name in extra}
    if host in LOOPBACK_NAMES or host.startswith("127."):
        names |= LOOPBACK_NAMES
    if host in WILDCARD_ADDRESSES:
        names |= LOOPBACK_NAMES | {socket.gethostname().lower(), socket.getfqdn().lower()}
        try:
            names |= {info[4][0].lower() for info in socket.getaddrinfo(socket.gethostname(), None)}
        except OSError:
            pass
    return frozenset(names - WILDCARD_ADDRESSES)


def host_name(header: str) -> str:
    """The name in a Host header, without its port ("[::1]:8000" -> "::1")."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]")[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostCheck:
    """Refuses (421, as JSON) a request whose Host header does not name this server: a page on
    another site that rebinds its DNS name to 127.0.0.1 reaches the server under its own name."""

    def __init__(self, app, allowed: frozenset[str]):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and "*" not in self.allowed:
            header = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1")
            if host_name(header) not in self.allowed:
                response = JSONResponse({"error": f"this server does not answer to Host {header[:100]!r}; "
                                                  "start it with --allow-host NAME to add a name"}, status_code=421)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

