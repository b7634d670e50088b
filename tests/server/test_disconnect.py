"""A client that leaves mid-stream frees the engine at once."""

import json
import time

import requests

from test_ops import metric_values


def test_disconnect_mid_stream_then_a_new_request_is_served_promptly(server):
    before = metric_values(server).get('strata:request_success_total|finished_reason=abort', 0)
    body = {
        "messages": [{"role": "user", "content": "Write a very long essay about the history of Rome."}],
        "max_tokens": 900,
        "temperature": 0,
        "stream": True,
    }
    r = requests.post(server.url + "/v1/chat/completions", json=body, stream=True, timeout=60)
    lines = r.iter_lines()
    seen = 0
    for line in lines:
        if line.startswith(b"data: ") and b'"content"' in line:
            seen += 1
            if seen >= 3:
                break
    assert seen >= 3
    r.close()
    t0 = time.time()
    quick = requests.post(
        server.url + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
        timeout=60,
    )
    elapsed = time.time() - t0
    assert quick.status_code == 200, quick.text
    # 900 tokens would take far longer than this; the abandoned generation must have stopped.
    assert elapsed < 8, f"the next request waited {elapsed:.1f}s"
    after = metric_values(server)['strata:request_success_total|finished_reason=abort']
    assert after == before + 1
