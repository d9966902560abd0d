"""A web page the user opens cannot drive the server, and a question whose LM calls all failed
is the upstream's error (502/504), not an empty answer."""

import json

import pytest
from dspy.utils.exceptions import LMServerError

import treeqa.lm
from tests.fakes import FakeEndpoint, generic_lm, local_client, scripted_lm
from treeqa.programs import build_program
from treeqa.serving import Served, allowed_hosts_for, create_app, program_info

Q = "Which city is the birthplace of the director of Jaws?"


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
