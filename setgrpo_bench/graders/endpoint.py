"""An OpenAI-compatible endpoint as the judge backend (``vllm serve``, TGI, hosted APIs).

Requests go out concurrently (asyncio, at most ``concurrency`` at once), each with a timeout; a
dropped connection, a timeout, HTTP 429/5xx or a malformed body is retried with exponential backoff;
identical requests of one batch are sent once. The API key is read from the environment variable
named in the config at request time and never stored, printed or written anywhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, SetgrpoBenchError


class JudgeEndpointError(SetgrpoBenchError):
    """The endpoint refused the request for a reason retrying cannot fix (e.g. an unknown model)."""


def endpoint_base(url: str) -> str:
    """The API root of an endpoint URL: ``…/v1`` (added when missing)."""
    base = url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


class EndpointJudge:
    """Answers judge questions through ``/v1/chat/completions`` (or ``/v1/completions``)."""

    def __init__(self, url: str, model: str, *, api_key_env: str | None = None, chat: bool = True,
                 concurrency: int = 8, timeout_s: float = 60.0, max_attempts: int = 4, backoff_s: float = 0.5) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError("judge_url", url, "an http(s) URL, e.g. http://127.0.0.1:8000/v1")
        if api_key_env and api_key_env not in os.environ:
            raise ConfigError("judge_api_key_env", api_key_env, "the name of a set environment variable",
                              f"Export {api_key_env}=... before the run.")
        self.base = endpoint_base(url)
        self.model, self.api_key_env, self.chat = model, api_key_env, chat
        self.concurrency, self.timeout_s = concurrency, timeout_s
        self.max_attempts, self.backoff_s = max_attempts, backoff_s

    def __repr__(self) -> str:
        return f"EndpointJudge({self.base!r}, model={self.model!r})"

    def identity(self) -> dict[str, Any]:
        return {"kind": "endpoint", "url": self.base, "model": self.model}

    def _body(self, question: str, profile: Any, seed: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "temperature": profile.temperature,
                                "max_tokens": profile.max_tokens, "seed": seed}
        if self.chat:
            messages = ([{"role": "system", "content": profile.system}] if profile.system else [])
            body["messages"] = messages + [{"role": "user", "content": question}]
        else:
            body["prompt"] = (profile.system + "\n\n" if profile.system else "") + question
        return body

    def _post(self, body: dict[str, Any]) -> str | None:
        """One request with retries; the answer text, or None when every attempt failed."""
        path = "/chat/completions" if self.chat else "/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = "Bearer " + os.environ[self.api_key_env]
        data = json.dumps(body).encode()
        for attempt in range(self.max_attempts):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(self.base + path, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                    payload = json.loads(reply.read().decode("utf-8"))
                choice = payload["choices"][0]
                return choice["message"]["content"] if self.chat else choice["text"]
            except urllib.error.HTTPError as exc:
                if exc.code == 429 or exc.code >= 500:
                    continue
                detail = exc.read().decode("utf-8", "replace")[:300]
                raise JudgeEndpointError(f"{self.base}{path} answered HTTP {exc.code}: {detail}") from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError, KeyError, IndexError, TypeError):
                continue  # dropped connection, timeout, malformed JSON or shape: retry
        return None

    async def _gather(self, bodies: list[dict[str, Any]]) -> list[str | None]:
        limit = asyncio.Semaphore(self.concurrency)

        async def one(body: dict[str, Any]) -> str | None:
            async with limit:
                return await asyncio.to_thread(self._post, body)

        return await asyncio.gather(*(one(b) for b in bodies))

    def answers(self, questions: Sequence[str], profile: Any, *, seeds: Sequence[int], attempt: int) -> list[str | None]:
        """Answer texts (None for a request that failed every attempt). Identical requests are sent once:
        a batch shares one seed (``seeds[0]``, offset by ``attempt``), so identical questions are identical requests."""
        seed = int(seeds[0]) + attempt if seeds else attempt
        unique = list(dict.fromkeys(questions))
        texts = asyncio.run(self._gather([self._body(q, profile, seed) for q in unique]))
        cache = dict(zip(unique, texts))
        return [cache[q] for q in questions]
