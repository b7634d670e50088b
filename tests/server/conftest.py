"""Fixtures that run `target/release/strata serve` on a free loopback port.

The binary and models come from the repository's build and the strata model cache
(STRATA_MODELS_DIR, default ~/.cache/strata/models); a missing model is fetched with
`strata pull`. Each server is stopped (SIGTERM, then SIGKILL) when its fixture ends.
"""

import os
import pathlib
import signal
import socket
import subprocess
import time

import anthropic
import openai
import pytest
import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = ROOT / "target" / "release" / "strata"
MODELS_DIR = pathlib.Path(os.environ.get("STRATA_MODELS_DIR", pathlib.Path.home() / ".cache" / "strata" / "models"))
SMOLLM = ("smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf")
QWEN = ("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf")
API_KEY = "test-key-123"


def model_path(known):
    """The cached GGUF of a known model, pulled if it is missing."""
    name, file_name = known
    path = MODELS_DIR / file_name
    if not path.exists():
        subprocess.run([str(BIN), "pull", name], check=True, timeout=900)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `strata serve` process."""

    def __init__(self, model, *args, env=None, tmp=None):
        if not BIN.exists():
            pytest.fail(f"{BIN} is missing: run `cargo build --release -p strata-cli` first")
        self.model = model
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = pathlib.Path(tmp) / f"serve-{self.port}.log"
        cmd = [str(BIN), "serve", "-m", str(model), "--port", str(self.port), "--alias", "*", *args]
        # Only the key a fixture asks for: an API key in the caller's environment must not leak in.
        full_env = {k: v for k, v in os.environ.items() if k != "STRATA_API_KEY"}
        full_env.update(env or {})
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        self.wait_ready()

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"strata serve exited with {self.proc.returncode}:\n{self.log_path.read_text()}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        pytest.fail(f"strata serve was not ready within {timeout}s:\n{self.log_path.read_text()}")

    def openai(self, api_key="unused"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=120)

    def anthropic(self, api_key="unused"):
        return anthropic.Anthropic(base_url=self.url, api_key=api_key, max_retries=0, timeout=120)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def smollm_path():
    return model_path(SMOLLM)


@pytest.fixture(scope="session")
def server(smollm_path, tmp_path_factory):
    """SmolLM2-135M with a 1024-token context and a 1 MiB body limit."""
    s = Server(smollm_path, "--ctx", "1024", "--max-body-mib", "1", tmp=tmp_path_factory.mktemp("serve"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def keyed_server(smollm_path, tmp_path_factory):
    """SmolLM2-135M that requires API_KEY (given through STRATA_API_KEY)."""
    s = Server(smollm_path, "--ctx", "256", env={"STRATA_API_KEY": API_KEY}, tmp=tmp_path_factory.mktemp("keyed"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def qwen_server(tmp_path_factory):
    """Qwen2.5-Coder-0.5B (Hermes tool calls in its template)."""
    s = Server(model_path(QWEN), "--ctx", "2048", tmp=tmp_path_factory.mktemp("qwen"))
    yield s
    s.stop()
