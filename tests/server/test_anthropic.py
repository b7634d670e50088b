"""The Anthropic Messages API through the official `anthropic` client."""

import requests

MSG = [{"role": "user", "content": "Name three animals."}]


def test_message_has_text_block_usage_and_stop_reason(server):
    m = server.anthropic().messages.create(model="any", max_tokens=8, messages=MSG, system="Be brief.", extra_body={"temperature": 0})
    assert m.type == "message" and m.role == "assistant"
    assert m.content[0].type == "text" and m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.usage.output_tokens <= 8 and m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0) > 5


def test_stream_events_arrive_in_order_and_match_the_whole_answer(server):
    client = server.anthropic()
    whole = client.messages.create(model="any", max_tokens=10, messages=MSG, extra_body={"temperature": 0})
    kinds, text = [], ""
    with client.messages.stream(model="any", max_tokens=10, messages=MSG, extra_body={"temperature": 0}) as stream:
        for ev in stream:
            kinds.append(ev.type)
            if ev.type == "content_block_delta":
                text += ev.delta.text
        final = stream.get_final_message()
    # The SDK adds its own "text" events; the wire events must follow Anthropic's order.
    wire = [k for k in kinds if k != "text"]
    assert wire[0] == "message_start"
    assert wire[1:3] == ["content_block_start", "content_block_delta"] or wire[1] == "ping"
    core = [k for k in wire if k != "ping"]
    assert core[1] == "content_block_start"
    assert set(core[2:-3]) == {"content_block_delta"}
    assert core[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert text == whole.content[0].text == final.content[0].text
    assert final.stop_reason == whole.stop_reason


def test_stop_sequences_and_beta_query(server):
    r = requests.post(
        server.url + "/v1/messages?beta=true",
        json={"model": "any", "max_tokens": 20, "temperature": 0, "messages": MSG, "stop_sequences": ["\n", "."]},
        headers={"anthropic-version": "2023-06-01"},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["stop_reason"] in ("stop_sequence", "end_turn", "max_tokens")
    if body["stop_reason"] == "stop_sequence":
        assert body["stop_sequence"] in ("\n", ".")
        assert "." not in body["content"][0]["text"] and "\n" not in body["content"][0]["text"]


def test_count_tokens(server):
    n = server.anthropic().messages.count_tokens(model="any", messages=MSG)
    assert n.input_tokens > 3


def test_anthropic_errors_have_the_anthropic_shape(server):
    import anthropic
    import pytest

    with pytest.raises(anthropic.BadRequestError) as e:
        server.anthropic().messages.create(model="any", max_tokens=8, messages=[])
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "invalid_request_error"
    r = requests.post(server.url + "/v1/messages", json={"messages": MSG})
    assert r.status_code == 400 and "max_tokens" in r.json()["error"]["message"]
