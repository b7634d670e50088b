"""Tool calls with Qwen2.5-Coder-0.5B, whose template uses Hermes `<tool_call>` JSON.

A forced `tool_choice` makes the server open the call for the model, so the model only writes
the arguments; the parser and the response shapes are what is tested here. The parser itself
is unit-tested in crates/strata-server/src/output (every split point, both syntaxes).
"""

import json

import pytest

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Current time in a timezone.",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
    },
]
FORCE = {"type": "function", "function": {"name": "get_weather"}}
ASK = [{"role": "user", "content": "What is the weather in Paris right now?"}]


def test_forced_tool_call_round_trip(qwen_server):
    client = qwen_server.openai()
    r = client.chat.completions.create(model="any", messages=ASK, tools=TOOLS, tool_choice=FORCE, max_tokens=40, temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    args = json.loads(call.function.arguments)
    assert isinstance(args, dict)
    # Round trip: the tool's answer goes back and the model answers in text.
    history = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"city": "Paris", "weather": "sunny, 22 C"})},
    ]
    final = client.chat.completions.create(model="any", messages=history, tools=TOOLS, tool_choice="none", max_tokens=16, temperature=0)
    assert final.choices[0].message.tool_calls is None
    assert final.choices[0].message.content.strip()
    assert final.usage.prompt_tokens_details.cached_tokens > 0


def test_forced_tool_call_streams_name_first_then_arguments(qwen_server):
    stream = qwen_server.openai().chat.completions.create(
        model="any", messages=ASK, tools=TOOLS, tool_choice=FORCE, max_tokens=40, temperature=0, stream=True
    )
    deltas = [c.choices[0].delta for c in stream if c.choices and c.choices[0].delta.tool_calls]
    assert deltas, "no tool-call deltas"
    first = deltas[0].tool_calls[0]
    assert first.index == 0 and first.id and first.function.name == "get_weather"
    pieces = [d.tool_calls[0].function.arguments or "" for d in deltas]
    assert len([p for p in pieces if p]) >= 2, "arguments were not streamed in pieces"
    assert isinstance(json.loads("".join(pieces)), dict)


def test_auto_tool_choice_gives_a_valid_call_or_text(qwen_server):
    r = qwen_server.openai().chat.completions.create(model="any", messages=ASK, tools=TOOLS, max_tokens=40, temperature=0)
    m = r.choices[0].message
    if m.tool_calls:
        assert r.choices[0].finish_reason == "tool_calls"
        for call in m.tool_calls:
            assert call.function.name in ("get_weather", "get_time")
            assert isinstance(json.loads(call.function.arguments), dict)
    else:
        assert m.content and "<tool_call>" not in m.content


def test_anthropic_forced_tool_use(qwen_server):
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"], "input_schema": t["function"]["parameters"]} for t in TOOLS]
    m = qwen_server.anthropic().messages.create(
        model="any", max_tokens=40, messages=ASK, tools=tools, tool_choice={"type": "tool", "name": "get_weather"}, extra_body={"temperature": 0}
    )
    uses = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and uses and uses[0].name == "get_weather"
    assert isinstance(uses[0].input, dict) and uses[0].id.startswith("toolu_")


def test_tool_choice_naming_an_unknown_function_is_400(qwen_server):
    import openai

    with pytest.raises(openai.BadRequestError):
        qwen_server.openai().chat.completions.create(
            model="any", messages=ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}, max_tokens=4
        )
