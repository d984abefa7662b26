"""Writes tests/canonicalize/data/cloud_requests.json: requests as the cloud SDKs send them.

Each SDK (boto3 bedrock-runtime, google-genai, openai.AzureOpenAI, and httpx for the Gemini
``key=`` and Vertex AI bearer-token forms) makes the same calls three times against a local
`CloudUpstream`: runs ``a`` and ``b`` ask the same questions (new SigV4 signatures, dates,
invocation ids, and other API keys and bearer tokens), run ``c`` asks another. The requests
are kept as the server received them, so the key tests read bytes no hand wrote. Run it
again after an SDK changes what it sends:

    .venv/bin/python -P tests/support/cloud_corpus.py

The credentials in it are made up.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import boto3
import httpx
import openai
import trustme
from botocore.config import Config
from google import genai
from google.genai import types

sys.path.insert(0, str(Path(__file__).parents[1]))
from support.cloud_upstream import CloudUpstream  # noqa: E402

CORPUS = Path(__file__).parents[1] / "canonicalize" / "data" / "cloud_requests.json"
CLAUDE = "anthropic.claude-3-5-sonnet-20240620-v1:0"
RUNS = {"a": "Lisbon", "b": "Lisbon", "c": "Porto"}


def calls(base: str, ca: Path, city: str, run: str) -> None:
    session = boto3.Session(
        region_name="us-east-1",
        aws_access_key_id="ASIACORPUSACCESSKEY1",
        aws_secret_access_key="corpus-secret",
        aws_session_token="IQoJb3JpZ2luX2VjCORPUSSESSIONTOKEN",
    )
    bedrock = session.client(
        "bedrock-runtime",
        endpoint_url=base,
        verify=str(ca),
        config=Config(retries={"max_attempts": 1}),
    )
    messages: Any = [{"role": "user", "content": [{"text": f"Weather in {city}"}]}]
    bedrock.converse(modelId=CLAUDE, messages=messages, inferenceConfig={"maxTokens": 50})
    list(bedrock.converse_stream(modelId=CLAUDE, messages=messages)["stream"])
    body = json.dumps(
        {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": f"Weather in {city}"}],
        }
    )
    bedrock.invoke_model(modelId=CLAUDE, body=body)["body"].read()
    list(bedrock.invoke_model_with_response_stream(modelId=CLAUDE, body=body)["body"])
    options = types.HttpOptions(base_url=base, api_version="v1beta")
    gemini = genai.Client(api_key=f"AIzaSyCORPUSKEY{run}0000000000000000", http_options=options)
    gemini.models.generate_content(model="gemini-2.0-flash", contents=f"Weather in {city}")
    list(
        gemini.models.generate_content_stream(
            model="gemini-2.0-flash", contents=f"Weather in {city}"
        )
    )
    question = {"contents": [{"role": "user", "parts": [{"text": f"Weather in {city}"}]}]}
    with httpx.Client(verify=str(ca), timeout=10) as http:
        http.post(
            f"{base}/v1beta/models/gemini-2.0-flash:generateContent",
            params={"key": f"AIzaSyCORPUSQUERYKEY{run}"},
            json=question,
        )
        vertex = "/v1/projects/p-1/locations/us-central1/publishers/google/models/gemini-2.0-flash"
        http.post(
            f"{base}{vertex}:streamGenerateContent",
            params={"alt": "sse"},
            headers={"Authorization": f"Bearer ya29.corpus{run}"},
            json=question,
        )
    http_client = openai.DefaultHttpxClient(verify=str(ca))
    azure = openai.AzureOpenAI(
        azure_endpoint=base,
        api_key=f"azure-corpus-key-{run}",
        api_version="2024-10-21",
        http_client=http_client,
    )
    chat: Any = [{"role": "user", "content": f"Weather in {city}"}]
    list(azure.chat.completions.create(model="agent-gpt4o", messages=chat, stream=True))
    v1 = openai.OpenAI(
        base_url=f"{base}/openai/v1/", api_key=f"azure-corpus-key-{run}", http_client=http_client
    )
    v1.chat.completions.create(model="agent-gpt4o", messages=chat)


def main() -> None:
    ca = trustme.CA()
    with tempfile.TemporaryDirectory() as folder:
        ca_file = Path(folder) / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        os.environ["SSL_CERT_FILE"] = str(ca_file)  # google-genai's client reads it
        for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
            os.environ.pop(name, None)
        corpus: dict[str, list[dict[str, Any]]] = {}
        with CloudUpstream(ca) as upstream:
            for run, city in RUNS.items():
                upstream.reset_counters()
                calls(upstream.base_url, ca_file, city, run)
                corpus[run] = [
                    {
                        "method": seen.method,
                        "target": seen.target,
                        "headers": [
                            [k.decode("latin-1"), v.decode("latin-1")] for k, v in seen.headers
                        ],
                        "body": seen.body.decode("utf-8"),
                    }
                    for seen in upstream.requests
                ]
    CORPUS.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n")
    print(f"{CORPUS}: {sum(len(r) for r in corpus.values())} requests")


if __name__ == "__main__":
    main()
