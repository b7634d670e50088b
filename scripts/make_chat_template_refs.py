#!/usr/bin/env python3
"""Render reference chat-template outputs with Python Jinja2, the way Hugging Face does.

Writes crates/strata-engine/tests/data/chat_template/:
  templates/NAME.jinja   the template sources (refreshed from their origin when it is on this machine)
  refs.json              templates (file, bos, eos), conversations, and one entry per render:
                         {template, conversation, add_generation_prompt, kwargs, expected | error}

The Rust test crates/strata-engine/tests/chat_template.rs renders every entry with minijinja and
must produce the identical string (or an error, with the same message for raise_exception).

Origins: the GGUF files in ~/.cache/strata/models (metadata key tokenizer.chat_template, read with
the `gguf` package) and llama.cpp's models/templates/ (files fetched from the models' Hugging Face
repos). When an origin is missing the committed template file is used as is.

Environment emulated (transformers' _compile_jinja_template): ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and loopcontrols; tojson = json.dumps(ensure_ascii=False, ...);
raise_exception; strftime_now; render(messages, tools, documents, add_generation_prompt,
bos_token, eos_token, **kwargs).

Usage: python3 scripts/make_chat_template_refs.py
"""

import json
import os
from datetime import datetime
from pathlib import Path

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "crates/strata-engine/tests/data/chat_template"
PLAIN = ROOT / "crates/strata-engine/src/chat_template/plain.jinja"
MODELS = Path(os.environ.get("STRATA_MODELS_DIR", Path.home() / ".cache/strata/models"))
LLAMA_CPP_TEMPLATES = (
    Path.home() / ".cache/strata/src/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates"
)

# name -> (origin kind, origin file, bos_token, eos_token, extra kwargs variants)
THINKING = [{}, {"enable_thinking": True}, {"enable_thinking": False}]
TEMPLATES = {
    "smollm2-135m": ("gguf", "SmolLM2-135M-Instruct.Q4_1.gguf", "<|im_start|>", "<|im_end|>", [{}]),
    "qwen2.5-coder-0.5b": (
        "gguf", "qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf", "<|endoftext|>", "<|im_end|>", [{}],
    ),
    "qwen3-0.6b": ("llama.cpp", "Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", THINKING),
    "qwen3.5-4b": ("llama.cpp", "Qwen3.5-4B.jinja", "", "<|im_end|>", THINKING),
    "qwen3-coder": ("llama.cpp", "Qwen3-Coder.jinja", "", "<|im_end|>", [{}]),
    "llama-3.1-8b": (
        "llama.cpp", "meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>",
        [{}, {"tools_in_user_message": False}],
    ),
    "gemma-2-2b": ("llama.cpp", "google-gemma-2-2b-it.jinja", "<bos>", "<eos>", [{}]),
    "plain": ("plain", None, "", "", [{}]),
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "default": 1},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current local time <HH:MM> & date.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    },
}


def call(id_, name, arguments):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATIONS = {
    "user_only": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system_user": {
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "What is 2+2?"},
        ]
    },
    "multi_turn": {
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "  Another one, with \"quotes\" and ünïcödé.  "},
        ]
    },
    "multi_turn_no_system": {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Tell me a joke."},
        ]
    },
    "tool_call": {
        "tools": [WEATHER_TOOL, TIME_TOOL],
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "Weather in Zürich and the time there?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    call("call_1", "get_weather", {"city": "Zürich", "unit": "celsius", "days": 2}),
                    call("call_2", "get_time", {"tz": "Europe/Zurich"}),
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
             "content": "{\"temp\": 21.5, \"sky\": \"sunny\"}"},
            {"role": "tool", "tool_call_id": "call_2", "name": "get_time", "content": "14:05"},
            {"role": "assistant", "content": "It is 21.5 °C and sunny; the time is 14:05."},
            {"role": "user", "content": "Thanks!"},
        ],
    },
    "tool_call_pending": {
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [call("call_9", "get_weather",
                                    {"city": "Paris", "days": 3, "detailed": True,
                                     "nested": {"a": [1, 2.5, None, True]}})],
            },
            {"role": "tool", "tool_call_id": "call_9", "name": "get_weather", "content": "rain"},
        ],
    },
    "thinking_history": {
        "messages": [
            {"role": "user", "content": "What is 3*4?"},
            {"role": "assistant", "content": "<think>\n3*4 is 12.\n</think>\n\n12"},
            {"role": "user", "content": "And 5*6?"},
            {"role": "assistant", "reasoning_content": "5*6 = 30.", "content": "30"},
        ]
    },
    "content_parts": {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "Part one. "},
                                         {"type": "text", "text": "Part two."}]},
        ]
    },
}


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def template_source(kind, origin):
    if kind == "plain":
        return PLAIN.read_text()
    if kind == "gguf" and (MODELS / origin).exists():
        import gguf  # only needed when refreshing from the models

        field = gguf.GGUFReader(MODELS / origin).fields.get("tokenizer.chat_template")
        return field.contents() if field is not None else None
    if kind == "llama.cpp" and (LLAMA_CPP_TEMPLATES / origin).exists():
        return (LLAMA_CPP_TEMPLATES / origin).read_text()
    return None


def main():
    env = environment()
    (OUT / "templates").mkdir(parents=True, exist_ok=True)
    templates, renders = {}, []
    for name, (kind, origin, bos, eos, kwarg_sets) in TEMPLATES.items():
        path = OUT / "templates" / f"{name}.jinja"
        source = template_source(kind, origin)
        if source is not None and kind != "plain":
            path.write_text(source)
        elif kind != "plain":
            source = path.read_text()
        file = "plain" if kind == "plain" else f"templates/{name}.jinja"
        templates[name] = {"file": file, "bos_token": bos, "eos_token": eos}
        compiled = env.from_string(source)
        for conv_name, conv in CONVERSATIONS.items():
            for kwargs in kwarg_sets:
                for agp in (False, True):
                    entry = {"template": name, "conversation": conv_name,
                             "add_generation_prompt": agp, "kwargs": kwargs}
                    try:
                        entry["expected"] = compiled.render(
                            messages=conv["messages"], tools=conv.get("tools"), documents=None,
                            add_generation_prompt=agp, bos_token=bos, eos_token=eos, **kwargs)
                    except jinja2.exceptions.TemplateError as e:
                        entry["error"] = {"raised": type(e) is jinja2.exceptions.TemplateError,
                                          "message": str(e)}
                    except (TypeError, ValueError, AttributeError) as e:
                        entry["error"] = {"raised": False, "message": f"{type(e).__name__}: {e}"}
                    renders.append(entry)
    refs = {"templates": templates, "conversations": CONVERSATIONS, "renders": renders}
    (OUT / "refs.json").write_text(json.dumps(refs, ensure_ascii=False, indent=1) + "\n")
    ok = sum("expected" in r for r in renders)
    print(f"wrote {OUT / 'refs.json'}: {ok} renders, {len(renders) - ok} expected errors")


if __name__ == "__main__":
    main()
