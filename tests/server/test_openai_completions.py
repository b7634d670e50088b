"""Text completions, the models list, and parity with `strata run`."""

import subprocess

from conftest import BIN

PROMPT = "The capital of France is"


def test_completion_text_and_stream_agree(server):
    client = server.openai()
    whole = client.completions.create(model="any", prompt=PROMPT, max_tokens=8, temperature=0)
    assert whole.choices[0].text and whole.usage.completion_tokens <= 8
    parts = list(client.completions.create(model="any", prompt=PROMPT, max_tokens=8, temperature=0, stream=True))
    assert "".join(p.choices[0].text for p in parts if p.choices) == whole.choices[0].text
    assert parts[-1].choices[0].finish_reason == whole.choices[0].finish_reason


def test_token_id_prompt_equals_text_prompt(server):
    import requests

    ids = requests.post(server.url + "/tokenize", json={"content": PROMPT, "add_special": True}).json()["tokens"]
    client = server.openai()
    a = client.completions.create(model="any", prompt=PROMPT, max_tokens=6, temperature=0)
    b = client.completions.create(model="any", prompt=ids, max_tokens=6, temperature=0)
    assert a.choices[0].text == b.choices[0].text
    assert b.usage.prompt_tokens == len(ids)


def test_completion_logprobs_legacy_shape(server):
    r = server.openai().completions.create(model="any", prompt=PROMPT, max_tokens=4, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == r.usage.completion_tokens
    assert "".join(lp.tokens) == r.choices[0].text
    assert all(len(t) == 2 for t in lp.top_logprobs)


def strata_run(model, *args):
    out = subprocess.run(
        [str(BIN), "run", "-m", str(model), "-n", "16", "--temp", "0", *args],
        capture_output=True, text=True, timeout=120, check=True,
    )
    return out.stdout.removesuffix("\n")


def test_greedy_completion_equals_strata_run(server, smollm_path):
    expected = strata_run(smollm_path, "-p", PROMPT)
    got = server.openai().completions.create(model="any", prompt=PROMPT, max_tokens=16, temperature=0)
    assert got.choices[0].text == expected


def test_greedy_chat_equals_strata_run_chat(server, smollm_path):
    question = "What is the tallest mountain?"
    expected = strata_run(smollm_path, "--chat", "-p", question)
    got = server.openai().chat.completions.create(
        model="any", messages=[{"role": "user", "content": question}], max_tokens=16, temperature=0
    )
    assert got.choices[0].message.content == expected


def test_models_lists_the_loaded_model(server):
    models = server.openai().models.list().data
    assert len(models) == 1 and models[0].id == "smollm2-135m"
