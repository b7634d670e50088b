"""OpenAI chat completions through the official `openai` client."""

import json

import openai
import pytest
import requests

MSG = [{"role": "user", "content": "Name three colors."}]


def test_chat_returns_text_usage_and_timings(server):
    r = server.openai().chat.completions.create(model="any", messages=MSG, max_tokens=8, temperature=0)
    choice = r.choices[0]
    assert isinstance(choice.message.content, str) and choice.message.content
    assert choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 5 and 0 < r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens_details.cached_tokens >= 0
    raw = requests.post(server.url + "/v1/chat/completions", json={"messages": MSG, "max_tokens": 4, "temperature": 0}).json()
    t = raw["timings"]
    assert t["predicted_n"] == raw["usage"]["completion_tokens"]
    assert t["prompt_n"] + t["cache_n"] == raw["usage"]["prompt_tokens"]
    assert t["predicted_per_second"] > 0


def test_streamed_chunks_concatenate_to_the_greedy_answer(server):
    client = server.openai()
    whole = client.chat.completions.create(model="any", messages=MSG, max_tokens=12, temperature=0)
    stream = client.chat.completions.create(
        model="any", messages=MSG, max_tokens=12, temperature=0, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_max_tokens_limits_the_answer(server):
    msg = [{"role": "user", "content": "Write a long story about a dragon and a knight."}]
    for field in ("max_tokens", "max_completion_tokens"):
        r = server.openai().chat.completions.create(model="any", messages=msg, temperature=0, **{field: 3})
        assert r.usage.completion_tokens == 3, field
        assert r.choices[0].finish_reason == "length"


def test_stop_sequence_ends_the_answer_before_it(server):
    client = server.openai()
    msg = [{"role": "user", "content": "Count from one to ten in words."}]
    full = client.chat.completions.create(model="any", messages=msg, max_tokens=24, temperature=0).choices[0].message.content
    words = full.split()
    assert len(words) >= 4, full
    stop = words[2]
    cut = client.chat.completions.create(model="any", messages=msg, max_tokens=24, temperature=0, stop=[stop, "zzzz"])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == full[: full.index(stop)]


def test_same_seed_gives_the_same_sampled_answer(server):
    client = server.openai()
    msg = [{"role": "user", "content": "Tell me a fun fact."}]

    def sample(seed):
        r = client.chat.completions.create(model="any", messages=msg, max_tokens=12, temperature=1.0, top_p=1.0, seed=seed)
        return r.choices[0].message.content

    first = sample(42)
    assert sample(42) == first
    assert any(sample(s) != first for s in (1, 2, 3)), "different seeds never changed a temperature-1 answer"


def test_logprobs_match_the_tokens_and_rank_alternatives(server):
    r = server.openai().chat.completions.create(
        model="any", messages=MSG, max_tokens=6, temperature=0, logprobs=True, top_logprobs=3
    )
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert t.logprob <= 0
        tops = [a.logprob for a in t.top_logprobs]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True)
        # Greedy: the chosen token is the most likely one.
        assert t.top_logprobs[0].token == t.token and abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5


def test_continued_conversation_reuses_the_cached_prefix(server):
    client = server.openai()
    first = [{"role": "system", "content": "You are terse. " * 20}, {"role": "user", "content": "Hi"}]
    a = client.chat.completions.create(model="any", messages=first, max_tokens=4, temperature=0)
    second = first + [{"role": "assistant", "content": a.choices[0].message.content}, {"role": "user", "content": "Bye"}]
    b = client.chat.completions.create(model="any", messages=second, max_tokens=4, temperature=0)
    assert b.usage.prompt_tokens_details.cached_tokens >= a.usage.prompt_tokens - 1


def test_json_response_format_is_valid_json_or_a_clear_error(server):
    client = server.openai()
    msg = [{"role": "user", "content": 'Reply with a JSON object like {"color": "red"} and nothing else.'}]
    try:
        r = client.chat.completions.create(
            model="any", messages=msg, max_tokens=24, temperature=0, response_format={"type": "json_object"}
        )
    except openai.UnprocessableEntityError as e:
        assert "response_format" in e.message
        assert "not valid JSON" in e.message or "not a JSON object" in e.message
    else:
        assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_wrong_sampling_values_are_rejected(server):
    client = server.openai()
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="any", messages=MSG, max_tokens=4, top_p=3.0)
    assert "top_p" in e.value.message
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="any", messages=MSG, max_tokens=4, n=2)
