"""An agent as far as freezeframe can tell: one model call with the official openai SDK.

Nothing here knows about freezeframe except the wait for it. The SDK takes the proxy
(HTTPS_PROXY), the CA bundle (SSL_CERT_FILE) and OPENAI_API_KEY (and OPENAI_BASE_URL, if set)
from the environment that docker-compose.yml gives it.
"""

import os
import sys
import time
import urllib.request

from openai import OpenAI

WAIT_SECONDS = float(os.environ.get("FREEZEFRAME_WAIT_SECONDS") or 120)


def wait_for_freezeframe(admin: str) -> None:
    """Its /health, polled until it answers (at most WAIT_SECONDS): compose starts this
    container beside freezeframe, not after it is ready, since healthchecks do not run
    everywhere (podman 4.3 without systemd). The CA bundle exists once /health answers.
    /health is public: the admin token is not needed for it (what it says without the token
    is only ok or degraded). NO_PROXY=freezeframe sends it straight to the admin port, not
    through the proxy."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            with urllib.request.urlopen(f"{admin}/health", timeout=5):
                return
        except OSError as error:
            if time.monotonic() > deadline:
                sys.exit(f"agent: freezeframe's {admin}/health did not answer: {error}")
            time.sleep(0.5)


wait_for_freezeframe(os.environ.get("FREEZEFRAME_ADMIN_URL", "http://freezeframe:8081"))

client = OpenAI()
reply = client.chat.completions.create(
    model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
    messages=[{"role": "user", "content": "Name a prime number between 10 and 20."}],
)
print(f"model: {reply.choices[0].message.content}")
