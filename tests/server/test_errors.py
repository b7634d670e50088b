"""Bad requests get OpenAI-shaped errors with the right status, and the server keeps serving."""

import openai
import pytest
import requests

from conftest import API_KEY


def post(server, path, data, **kw):
    return requests.post(server.url + path, data=data, headers={"content-type": "application/json"}, timeout=60, **kw)


def assert_error(r, status, *words):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["type"] and err["message"]
    for w in words:
        assert w in err["message"], err["message"]


def test_malformed_json_is_400(server):
    assert_error(post(server, "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}'), 400, "malformed JSON")
    assert_error(post(server, "/v1/completions", b"not json"), 400)
    assert_error(post(server, "/v1/chat/completions", b""), 400)


def test_fields_of_the_wrong_type_are_400_naming_the_field(server):
    body = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "ten"}'
    r = post(server, "/v1/chat/completions", body)
    assert_error(r, 400, "max_tokens")
    assert r.json()["error"]["param"] == "max_tokens"
    assert_error(post(server, "/v1/chat/completions", b'{"messages": "hi"}'), 400, "messages")


def test_empty_messages_and_unknown_roles_are_400(server):
    with pytest.raises(openai.BadRequestError) as e:
        server.openai().chat.completions.create(model="any", messages=[])
    assert "messages" in e.value.message
    r = post(server, "/v1/chat/completions", b'{"messages": [{"role": "wizard", "content": "hi"}]}')
    assert_error(r, 400, "wizard")


def test_prompt_longer_than_the_context_is_400_not_truncated(server):
    long = "word " * 3000
    with pytest.raises(openai.BadRequestError) as e:
        server.openai().chat.completions.create(model="any", messages=[{"role": "user", "content": long}], max_tokens=4)
    assert "context" in e.value.message and "1024" in e.value.message
    r = requests.post(server.url + "/v1/completions", json={"prompt": long, "max_tokens": 2})
    assert_error(r, 400, "context")


def test_unknown_route_is_404_and_wrong_method_405(server):
    assert_error(requests.get(server.url + "/v1/nope"), 404, "/v1/nope")
    assert requests.get(server.url + "/v1/chat/completions").status_code == 405


def test_oversized_body_is_413(server):
    big = b'{"prompt": "' + b"a" * (2 << 20) + b'"}'
    assert_error(post(server, "/v1/completions", big), 413)


def test_server_still_serves_after_bad_requests(server):
    r = server.openai().chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert r.usage.completion_tokens >= 1


def test_api_key_is_required_when_set(keyed_server):
    s = keyed_server
    msg = [{"role": "user", "content": "hi"}]
    assert requests.get(s.url + "/health").status_code == 200
    with pytest.raises(openai.AuthenticationError):
        s.openai(api_key="wrong").chat.completions.create(model="any", messages=msg, max_tokens=2)
    r = requests.post(s.url + "/v1/chat/completions", json={"messages": msg, "max_tokens": 2})
    assert_error(r, 401, "API key")
    ok = s.openai(api_key=API_KEY).chat.completions.create(model="any", messages=msg, max_tokens=2)
    assert ok.choices[0].message.content is not None
    # The Anthropic client sends x-api-key.
    m = s.anthropic(api_key=API_KEY).messages.create(model="any", max_tokens=2, messages=msg)
    assert m.content
    r = requests.get(s.url + "/metrics")
    assert r.status_code == 401
