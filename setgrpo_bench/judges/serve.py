"""A minimal OpenAI-compatible server for a local transformers model: ``/v1/chat/completions`` and
``/v1/completions``, the protocol ``vllm serve`` speaks. It lets the endpoint judge run against any
local checkpoint without vLLM (and is what the tests talk to).

    python -m setgrpo_bench serve-judge PATH [--port 8000]
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

from ..policy import Policy, load_policy
from .transformers_judge import context_length


def completion(policy: Policy, prompt: str, *, temperature: float, max_tokens: int, seed: int | None) -> str:
    """Sample a continuation of ``prompt`` (seeded per request when a seed is given)."""
    tok = policy.tokenizer
    tok.truncation_side = "left"  # a long prompt keeps its end, where the answer follows
    room = max(context_length(policy.model) - max_tokens, 1)
    enc = tok([prompt], return_tensors="pt", truncation=True, max_length=room).to(policy.device)
    generator_state = torch.random.fork_rng(devices=[])
    with generator_state, torch.no_grad():
        if seed is not None:
            torch.manual_seed(seed)
        out = policy.model.generate(**enc, do_sample=temperature > 0, temperature=max(temperature, 1e-5), top_k=0,
                                    max_new_tokens=max_tokens, pad_token_id=tok.pad_token_id)
    return tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


class _Handler(BaseHTTPRequestHandler):
    policy: Policy
    model_name: str
    lock: threading.Lock

    def log_message(self, format: str, *args: Any) -> None:  # requests carry API keys in headers: log nothing
        return

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._reply(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        except (ValueError, json.JSONDecodeError):
            self._reply(400, {"error": {"message": "the body is not JSON"}})
            return
        if body.get("model") != self.model_name:
            self._reply(404, {"error": {"message": f"model {body.get('model')!r} is not served; serving {self.model_name!r}"}})
            return
        chat = self.path.endswith("chat/completions")
        if chat:
            prompt = self.policy.format_prompt("\n\n".join(m["content"] for m in body.get("messages", [])))
        else:
            prompt = body.get("prompt", "")
        with self.lock:  # one generation at a time on the shared model
            text = completion(self.policy, prompt, temperature=float(body.get("temperature", 1.0)),
                              max_tokens=int(body.get("max_tokens", 32)), seed=body.get("seed"))
        choice = {"index": 0, "finish_reason": "stop", **({"message": {"role": "assistant", "content": text}} if chat else {"text": text})}
        self._reply(200, {"object": "chat.completion" if chat else "text_completion", "model": self.model_name,
                          "choices": [choice]})


def make_server(path: str | Path, *, host: str = "127.0.0.1", port: int = 0, model_name: str | None = None,
                handler: type[_Handler] = _Handler) -> ThreadingHTTPServer:
    """A server for the model at ``path`` (``port=0``: any free port; see ``server.server_address``)."""
    policy = load_policy(path)
    attrs = {"policy": policy, "model_name": model_name or policy.name, "lock": threading.Lock()}
    return ThreadingHTTPServer((host, port), type("JudgeHandler", (handler,), attrs))
