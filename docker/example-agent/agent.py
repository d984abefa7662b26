"""An agent as far as freezeframe can tell: one model call with the official openai SDK.

Nothing here knows about freezeframe except the optional mode line. The SDK takes the
proxy (HTTPS_PROXY), the CA bundle (SSL_CERT_FILE) and OPENAI_API_KEY (and OPENAI_BASE_URL,
if set) from the environment that docker-compose.yml gives it.
"""

import json
import os
import urllib.request

from openai import OpenAI

# NO_PROXY=freezeframe: this call goes straight to the admin API, not through the proxy,
# which asks for its admin token.
admin = os.environ.get("FREEZEFRAME_ADMIN_URL", "http://freezeframe:8081")
token = os.environ.get("FREEZEFRAME_ADMIN_TOKEN")
asked = urllib.request.Request(
    f"{admin}/api/mode", headers={"Authorization": f"Bearer {token}"} if token else {}
)
with urllib.request.urlopen(asked, timeout=10) as response:
    state = json.load(response)
print(f"freezeframe: mode {state['mode']}, cassette {state['cassette']}")

client = OpenAI()
reply = client.chat.completions.create(
    model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
    messages=[{"role": "user", "content": "Name a prime number between 10 and 20."}],
)
print(f"model: {reply.choices[0].message.content}")
