"""Operations routes: metrics (Prometheus text and JSON), status, tokenize, detokenize."""

import requests
from prometheus_client.parser import text_string_to_metric_families


def metric_values(server):
    r = requests.get(server.url + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    values = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            key = s.name + "".join(f"|{k}={v}" for k, v in sorted(s.labels.items()))
            values[key] = s.value
    return values


def test_metrics_parse_as_prometheus_text_and_count_requests(server):
    before = metric_values(server)
    r = server.openai().chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    after = metric_values(server)
    assert after["strata:model_ready"] == 1
    assert after["strata:prompt_tokens_total"] - before.get("strata:prompt_tokens_total", 0) == r.usage.prompt_tokens
    gen = after["strata:generation_tokens_total"] - before.get("strata:generation_tokens_total", 0)
    assert gen == r.usage.completion_tokens
    assert after["strata:num_requests_waiting"] == 0
    assert after["strata:e2e_request_latency_seconds_count"] >= 1
    key = "strata:http_requests_total|route=/v1/chat/completions|status=200"
    assert after[key] - before.get(key, 0) == 1
    assert "strata:prefix_cache_hits_total" in after and "strata:generation_tokens_per_second" in after


def test_metrics_as_json(server):
    a = requests.get(server.url + "/metrics?format=json").json()
    b = requests.get(server.url + "/metrics", headers={"accept": "application/json"}).json()
    for body in (a, b):
        assert body["model_ready"] is True
        assert isinstance(body["generation_tokens_total"], int)


def test_status_and_health(server):
    assert requests.get(server.url + "/health").json() == {"status": "ok"}
    st = requests.get(server.url + "/v1/status").json()
    assert st["status"] == "ready" and st["n_ctx"] == 1024 and st["arch"] == "llama"
    assert st["api_key_required"] is False


def test_tokenize_and_detokenize_round_trip(server):
    text = "Hello, world! Ünïcödé ✓"
    ids = requests.post(server.url + "/tokenize", json={"content": text}).json()["tokens"]
    assert all(isinstance(i, int) for i in ids)
    assert requests.post(server.url + "/detokenize", json={"tokens": ids}).json()["content"] == text
    pieces = requests.post(server.url + "/tokenize", json={"content": "Hi there", "with_pieces": True}).json()["tokens"]
    assert "".join(p["piece"] for p in pieces) == "Hi there"
    r = requests.post(server.url + "/detokenize", json={"tokens": [10**9]})
    assert r.status_code == 400
