"""Clients that send their request body slowly, or leave halfway through it, against a real
uvicorn server on 127.0.0.1: a body must arrive within the server's deadline (408, and the
connection closed, so its socket is freed), and a client that leaves is one warning line, not
a traceback."""

import logging
import os
import socket
import threading
import time
from contextlib import contextmanager

from tests.fakes import scripted_lm
from treeqa.programs import build_program
from treeqa.serving import Served, create_app, program_info

HEAD = (b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 400\r\n\r\n{\"question\": \"")


class Kept(logging.Handler):
    """Every record the server logs, kept for the test to read."""

    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def tracebacks(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.exc_info or "Traceback" in r.getMessage()]


@contextmanager
def live_server(body_timeout: float):
    """The app under uvicorn on a free loopback port, in a thread; yields (port, the kept log)."""
    import uvicorn

    program = build_program("direct")
    lm, _ = scripted_lm(lambda call: {"answer": "Cincinnati"}, whole_call=True)
    app = create_app(Served(program, lm, None, program_info(program, "direct", lm, None)), time_limit=20,
                     body_timeout=body_timeout)
    kept = Kept()
    loggers = [logging.getLogger(name) for name in ("treeqa", "uvicorn", "asyncio")]
    for logger in loggers:
        logger.addHandler(kept)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started
        yield server.servers[0].sockets[0].getsockname()[1], kept
    finally:
        server.should_exit = True
        thread.join(10)
        for logger in loggers:
            logger.removeHandler(kept)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def trickle(clients: list[socket.socket], seconds: float) -> tuple[dict, set]:
    """Send each client's body a byte at a time until the server answers and closes it, or
    `seconds` pass; returns what each received and which the server closed."""
    replies = {c: b"" for c in clients}
    closed: set[socket.socket] = set()
    deadline = time.monotonic() + seconds
    while len(closed) < len(clients) and time.monotonic() < deadline:
        for client in set(clients) - closed:
            try:
                if not replies[client]:
                    client.send(b"x")
                chunk = client.recv(4096)
            except TimeoutError:
                continue
            except OSError:  # reset: the server closed while a byte was on its way
                closed.add(client)
                continue
            replies[client] += chunk
            if not chunk:
                closed.add(client)
        time.sleep(0.1)
    return replies, closed


# benchmarks/faults.md, fourth round, serve and the corpus registry #1: a body has a deadline

def test_1_slow_bodies_get_408_and_their_sockets_are_freed():
    with live_server(body_timeout=1.0) as (port, kept):
        before = open_fds()
        clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(6)]
        for client in clients:
            client.sendall(HEAD)
            client.settimeout(0.05)
        replies, closed = trickle(clients, seconds=8)
        while_clients_hold_theirs = open_fds()  # the clients' 6 sockets are still open here
        for client in clients:
            client.close()
        after = open_fds()
    assert all(reply.startswith(b"HTTP/1.1 408") for reply in replies.values()), list(replies.values())
    assert all(b"connection: close" in reply.lower() and b"did not arrive within 1 s" in reply
               for reply in replies.values())
    assert closed == set(clients)  # the server closed each connection itself
    assert while_clients_hold_theirs <= before + len(clients) + 2  # the server's side holds none of them
    assert after <= before + 2
    assert kept.tracebacks() == []


# benchmarks/faults.md, fourth round, serve and the corpus registry #2: a client leaves mid-body

def test_2_a_client_that_leaves_mid_body_is_one_warning_not_a_traceback():
    with live_server(body_timeout=10.0) as (port, kept):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            client.sendall(HEAD + b"Which city")
            time.sleep(0.3)  # the server is reading the body
        deadline = time.monotonic() + 10
        while not kept.records and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # anything logged after the warning
    assert kept.tracebacks() == []
    serious = [r.getMessage() for r in kept.records if r.levelno >= logging.WARNING]
    assert serious == ["a client left before its request body arrived (24 bytes of it came)"]


def test_serve_refuses_a_body_timeout_that_is_not_positive():
    from typer.testing import CliRunner

    from treeqa.cli import app

    result = CliRunner().invoke(app, ["serve", "--program", "direct", "--body-timeout", "0"])
    assert result.exit_code == 1 and "--body-timeout must be a positive number of seconds (got 0)" in result.output
