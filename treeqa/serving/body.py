"""Reading a question's request body: JSON only, no further than its size limit, and within a
deadline (a client trickling its body would otherwise hold a socket and a task for ever)."""

from __future__ import annotations

import asyncio
import json
import logging

from fastapi import Request
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from treeqa.programs.common import MAX_QUESTION_CHARS, check_question
from treeqa.serving.errors import ServeError

MAX_BODY_BYTES = 64 * 1024  # a question is at most MAX_QUESTION_CHARS; the body is read no further than this
BODY_TIMEOUT = 15.0  # seconds a request body may take to arrive whole (`serve --body-timeout`)

log = logging.getLogger(__name__)


class AskRequest(BaseModel):
    question: str


async def read_question(request: Request, body_timeout: float = BODY_TIMEOUT) -> str:
    """The question of a POST body, read no further than MAX_BODY_BYTES (a larger body is
    refused while it arrives, never held or parsed whole) and within `body_timeout` seconds (408,
    and the connection closed). Only a JSON body is read: a form or text/plain POST is what any
    web page can send cross-site without asking."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise ServeError(415, f"send the question as JSON with Content-Type: application/json, not "
                              f"{media_type[:80] or 'no Content-Type'}")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ServeError(400, "bad request: Content-Length is not a number")
        if int(declared) > MAX_BODY_BYTES:
            raise ServeError(413, f"the request body is {int(declared):,} bytes; at most {MAX_BODY_BYTES:,}")
    body = await _read_body(request, body_timeout)
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise ServeError(422, "bad request: body: not UTF-8 text") from None
    except (json.JSONDecodeError, RecursionError):
        raise ServeError(422, 'bad request: body: not JSON; send {"question": "..."}') from None
    try:
        return _question(AskRequest.model_validate(data))
    except ValidationError as exc:
        messages = "; ".join(f"{'.'.join(['body', *map(str, e['loc'])])}: {e['msg']}" for e in exc.errors())
        raise ServeError(422, f"bad request: {messages}") from None


async def _read_body(request: Request, body_timeout: float) -> bytearray:
    """The body, whole within `body_timeout` seconds; a client that leaves halfway is one warning
    (its answer goes nowhere), not a traceback."""
    body = bytearray()
    try:
        async with asyncio.timeout(body_timeout):
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise ServeError(413, f"the request body is over {MAX_BODY_BYTES:,} bytes")
    except TimeoutError:
        raise ServeError(408, f"the request body did not arrive within {body_timeout:g} s ({len(body):,} bytes came)",
                         {"Connection": "close"}) from None
    except ClientDisconnect:
        log.warning("a client left before its request body arrived (%s bytes of it came)", f"{len(body):,}")
        raise ServeError(400, "the client left before its request body arrived", {"Connection": "close"}) from None
    return body


def _question(body: AskRequest) -> str:
    if len(body.question) > MAX_QUESTION_CHARS:
        raise ServeError(413, f"the question is {len(body.question):,} characters; at most {MAX_QUESTION_CHARS:,}")
    try:
        return check_question(body.question, "ask")
    except ValueError as exc:
        raise ServeError(422, str(exc)) from None

