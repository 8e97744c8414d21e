"""The loopback OpenAI-compatible server itself: HTTP/1.1 as the judges' client and others
speak it (the backends' tests rely on its answers, the benchmark on its counts)."""

from __future__ import annotations

import http.client
import json

from tests.judges.fake_openai import FakeOpenAI, status, verdict

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Which one?"}]})


def post(connection: http.client.HTTPConnection, path: str, body: str, **headers):
    connection.request("POST", path, body=body, headers=headers)
    response = connection.getresponse()
    return response.status, response.read().decode(), response


def test_requests_on_one_kept_alive_connection_are_answered_in_order():
    with FakeOpenAI([verdict("1"), verdict("2"), status(503, retry_after="2")]) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        answers = [post(connection, "/v1/chat/completions", BODY) for _ in range(3)]
        connection.close()
    assert [code for code, _, _ in answers] == [200, 200, 503]
    contents = [json.loads(body)["choices"][0]["message"]["content"] for _, body, _ in answers[:2]]
    assert [json.loads(content)["better"] for content in contents] == ["1", "2"]
    assert answers[2][2].getheader("Retry-After") == "2"
    assert server.connections == 1
    assert server.request_count == 3
    assert server.requests[0].body["model"] == "m"


def test_other_paths_and_bodies_that_are_not_json_are_refused_uncounted():
    with FakeOpenAI() as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        missing = post(connection, "/v1/models", BODY)[0]
        broken = post(connection, "/v1/chat/completions", "{not json")[0]
        connection.close()
    assert (missing, broken) == (404, 400)
    assert server.request_count == 0


def test_a_client_asking_to_close_gets_its_answer_then_the_close():
    with FakeOpenAI() as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        code, _, response = post(connection, "/v1/chat/completions", BODY, Connection="close")
        connection.close()
    assert code == 200
    assert response.getheader("Connection") == "close"
    assert response.will_close


def test_delays_overlap_on_the_loop():
    with FakeOpenAI(delay_s=0.3) as server:
        connections = [
            http.client.HTTPConnection("127.0.0.1", server.port, timeout=5) for _ in range(20)
        ]
        for connection in connections:
            connection.request("POST", "/v1/chat/completions", body=BODY)
        codes = [connection.getresponse().status for connection in connections]
        for connection in connections:
            connection.close()
    assert codes == [200] * 20
    assert server.max_in_flight == 20
