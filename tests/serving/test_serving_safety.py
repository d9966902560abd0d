"""A web page the user opens cannot drive the server, and a question whose LM calls all failed
is the upstream's error (502/504), not an empty answer. A body is read no further than its limit
(after the queue check), upstream error text stays in the server's log, and every error is
`{"error": ...}`."""

import json

import pytest
from dspy.utils.exceptions import LMServerError

import treeqa.lm
from tests.fakes import FakeEndpoint, generic_lm, local_client, scripted_lm
from treeqa.programs import build_program
from treeqa.serving import Served, allowed_hosts_for, create_app, program_info
from treeqa.serving.app import MAX_BODY_BYTES

Q = "Which city is the birthplace of the director of Jaws?"
SECRET = "sk-live-0123456789"


def direct_served(reply=lambda call: {"answer": "Cincinnati"}):
    program = build_program("direct")
    lm, engine = scripted_lm(reply, whole_call=True)
    return Served(program, lm, None, program_info(program, "direct", lm, None)), engine


@pytest.mark.parametrize("content_type",
                         ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None])
def test_a_question_a_cross_site_form_can_send_is_refused(content_type):
    """text/plain, form and multipart POSTs need no CORS preflight: any page could send them."""
    served, engine = direct_served()
    headers = {"Content-Type": content_type} if content_type else {}
    with local_client(create_app(served, time_limit=20)) as client:
        for route in ("/v1/ask", "/v1/ask/stream"):
            response = client.post(route, content=json.dumps({"question": Q}).encode(), headers=headers)
            assert response.status_code == 415 and "application/json" in response.json()["error"]
        ok = client.post("/v1/ask", content=json.dumps({"question": Q}).encode(),
                         headers={"Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code == 200 and ok.json()["answer"] == "Cincinnati" and len(engine.calls) == 1


def test_no_cors_header_is_sent_and_a_preflight_is_not_granted():
    served, _ = direct_served()
    with local_client(create_app(served, time_limit=20)) as client:
        answered = client.post("/v1/ask", json={"question": Q}, headers={"Origin": "http://evil.example"})
        preflight = client.options("/v1/ask", headers={"Origin": "http://evil.example",
                                                       "Access-Control-Request-Method": "POST"})
    assert answered.status_code == 200
    for response in (answered, preflight):
        assert not any(h.lower().startswith("access-control-") for h in response.headers), response.headers
    assert preflight.status_code == 405


def test_a_host_header_that_does_not_name_the_server_is_refused():
    """DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1 reaches the
    server with Host evil.example, and is refused; the names of this server are answered."""
    served, engine = direct_served()
    app = create_app(served, time_limit=20)
    with local_client(app) as client:
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", ""):
            refused = client.post("/v1/ask", json={"question": Q}, headers={"Host": host})
            assert refused.status_code == 421 and "--allow-host" in refused.json()["error"], host
            assert client.get("/v1/program", headers={"Host": host}).status_code == 421
        for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST"):
            assert client.get("/healthz", headers={"Host": host}).status_code == 200, host
    assert engine.calls == []


def test_the_names_a_server_answers_to_follow_its_address_and_the_allow_list():
    import socket

    assert allowed_hosts_for("127.0.0.1") == {"127.0.0.1", "localhost", "::1"}
    assert allowed_hosts_for("10.0.0.5") == {"10.0.0.5"}
    assert socket.gethostname().lower() in allowed_hosts_for("0.0.0.0") and "localhost" in allowed_hosts_for("::")
    assert "0.0.0.0" not in allowed_hosts_for("0.0.0.0")
    named = allowed_hosts_for("127.0.0.1", ["qa.example.org"])
    served, _ = direct_served()
    with local_client(create_app(served, time_limit=20, allowed_hosts=named)) as client:
        assert client.get("/healthz", headers={"Host": "qa.example.org"}).status_code == 200
        assert client.get("/healthz", headers={"Host": "other.example.org"}).status_code == 421
    with local_client(create_app(served, time_limit=20, allowed_hosts=allowed_hosts_for("0.0.0.0", ["*"]))) as client:
        assert client.get("/healthz", headers={"Host": "anything.example"}).status_code == 200


def test_a_question_whose_lm_calls_all_failed_is_502_not_an_empty_answer():
    served, _ = direct_served(lambda call: LMServerError("HTTP 500 from upstream"))
    with local_client(create_app(served, time_limit=20)) as client:
        response = client.post("/v1/ask", json={"question": Q})
        stream = client.post("/v1/ask/stream", json={"question": Q}).text
    assert response.status_code == 502
    body = response.json()
    assert body["error"].startswith("no answer: ") and body["failures"]
    assert all(f["error"] and "upstream" not in f["message"] for f in body["failures"])
    assert "event: error" in stream and '"status": 502' in stream


def test_an_endpoint_past_its_deadline_is_504_and_an_answer_is_still_200(settings_env):
    settings_env(lm_timeout=1.0, lm_retries=0)
    with FakeEndpoint(lambda n, body, headers: (200, "late", 5)) as ep:
        lm = treeqa.lm.get_lm("openai/m", api_base=ep.url, api_key="k", cache=False)
        lm.wait_ready()
        program = build_program("direct")
        with local_client(create_app(Served(program, lm, None, {}), time_limit=20)) as client:
            timed_out = client.post("/v1/ask", json={"question": Q})
    assert timed_out.status_code == 504 and timed_out.json()["failures"][0]["error"] == "EndpointTimeoutError"
    program = build_program("direct")
    lm = generic_lm(default_answer="Cincinnati")
    with local_client(create_app(Served(program, lm, None, {}), time_limit=20)) as client:
        answered = client.post("/v1/ask", json={"question": Q})
    assert answered.status_code == 200 and answered.json()["answer"] == "Cincinnati"


# benchmarks/faults.md, second round #1: the body is read no further than its limit, after the queue check

def test_1_a_large_body_is_refused_unread_and_the_queue_applies_first():
    served, engine = direct_served(lambda call: {"answer": "Cincinnati"})
    with local_client(create_app(served, queue_size=0, time_limit=20)) as client:
        big = client.post("/v1/ask", content=b'{"question": "' + b"x" * (MAX_BODY_BYTES * 4) + b'"}',
                          headers={"Content-Type": "application/json"})
        client.app.state.runner._in_flight = 1  # one request running, none may wait
        busy = client.post("/v1/ask", json={"question": Q})
    assert big.status_code == 413 and "at most 65,536" in big.json()["error"]
    assert busy.status_code == 503 and engine.calls == []


# benchmarks/faults.md, second round #2: upstream error text never reaches a client

def test_2_upstream_text_stays_in_the_log(caplog):
    def leaky(call):
        return RuntimeError(f"upstream said: Authorization: Bearer {SECRET} at http://10.1.2.3:8000")

    served, _ = direct_served(leaky)
    with local_client(create_app(served, time_limit=20)) as client:
        body = client.post("/v1/ask", json={"question": Q}).json()
        stream = client.post("/v1/ask/stream", json={"question": Q}).text
    assert SECRET not in json.dumps(body) and "10.1.2.3" not in json.dumps(body) and SECRET not in stream
    assert body["failures"] and body["failures"][0]["message"] == "the language model call failed"
    # the operator still sees what happened, without the key (issue 62: keys never reach a log)
    assert "upstream said: Authorization: Bearer [redacted]" in caplog.text and SECRET not in caplog.text


def test_2_a_crash_is_a_generic_500_and_its_logged_traceback_has_no_key(caplog):
    served, _ = direct_served(lambda call: {"answer": "x"})
    crash = ValueError(f"upstream echoed Authorization: Bearer {SECRET}")
    served.program.forward = lambda question: (_ for _ in ()).throw(crash)
    with local_client(create_app(served, time_limit=20), raise_server_exceptions=False) as client:
        response = client.post("/v1/ask", json={"question": Q})
        stream = client.post("/v1/ask/stream", json={"question": Q}).text
    assert response.status_code == 500 and SECRET not in response.text and "error" in response.json()
    assert '"status": 500' in stream and SECRET not in stream
    # the operator's log keeps the traceback (where it crashed), without the key
    assert caplog.text.count("Traceback") == 2 and "ValueError: upstream echoed" in caplog.text
    assert "Bearer [redacted]" in caplog.text and SECRET not in caplog.text


# benchmarks/faults.md, second round #16: every error has one shape

def test_404_405_and_non_utf8_bodies_are_error_objects():
    served, _ = direct_served(lambda call: {"answer": "x"})
    with local_client(create_app(served, time_limit=20)) as client:
        missing = client.get("/nothing")
        wrong = client.get("/v1/ask")
        binary = client.post("/v1/ask", content=b'{"question": "\xff\xfe"}',
                             headers={"Content-Type": "application/json"})
    assert (missing.status_code, wrong.status_code, binary.status_code) == (404, 405, 422)
    assert all(set(r.json()) == {"error"} for r in (missing, wrong, binary))
