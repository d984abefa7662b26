"""The replicas smoke test's agent: requests through three freezeframe replicas at once.

    load_agent.py record N   N chat completions, one worker per replica (freezeframe-1, -2,
                             -3), each through its own replica; prints one JSON line per
                             acknowledged answer ({"i", "answer"}) and one `failed` line per
                             request that got no answer (its replica was killed)
    load_agent.py check FILE reads the acknowledged lines from FILE, asks each again (replay)
                             through the replicas in turn, and exits 1 unless every answer is
                             the acknowledged one

It runs in the example agent's image (the openai SDK), with the CA bundle on /data.
"""

import json
import sys
import threading
import time
import urllib.request

import httpx
from openai import OpenAI

REPLICAS = ["freezeframe-1", "freezeframe-2", "freezeframe-3"]
WAIT_SECONDS = 120.0


def wait_healthy(name: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while True:
        try:
            opener.open(f"http://{name}:8081/health", timeout=5).close()
            return
        except OSError as error:
            if time.monotonic() > deadline:
                sys.exit(f"load agent: {name}'s /health did not answer: {error}")
            time.sleep(0.5)


def client(name: str) -> OpenAI:
    http = httpx.Client(proxy=f"http://{name}:8080", verify="/data/ca-bundle.pem", timeout=30)
    return OpenAI(http_client=http, max_retries=0)


def ask(openai: OpenAI, i: int) -> str:
    reply = openai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": f"request {i}"}]
    )
    return str(reply.choices[0].message.content)


def record(count: int) -> None:
    for name in REPLICAS:
        wait_healthy(name)
    print("load agent: all replicas healthy", flush=True)
    lock = threading.Lock()

    def worker(slot: int) -> None:
        openai = client(REPLICAS[slot])
        for i in range(slot, count, len(REPLICAS)):
            try:
                answer = ask(openai, i)
            except Exception as error:
                with lock:
                    print(f"failed {i} via {REPLICAS[slot]}: {type(error).__name__}", flush=True)
                continue
            with lock:
                print(json.dumps({"i": i, "via": REPLICAS[slot], "answer": answer}), flush=True)

    threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(len(REPLICAS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def check(path: str) -> None:
    with open(path) as lines:
        acknowledged = [json.loads(line) for line in lines if line.startswith("{")]
    for name in REPLICAS:
        wait_healthy(name)
    clients = [client(name) for name in REPLICAS]
    wrong = 0
    for n, ack in enumerate(acknowledged):
        try:
            answer = ask(clients[n % len(clients)], ack["i"])
        except Exception as error:
            answer = f"{type(error).__name__}: {error}"
        if answer != ack["answer"]:
            wrong += 1
            print(f"request {ack['i']}: replayed {answer!r}, acknowledged {ack['answer']!r}")
    print(f"load agent: {len(acknowledged) - wrong} of {len(acknowledged)} replayed identical")
    sys.exit(1 if wrong or not acknowledged else 0)


if __name__ == "__main__":
    record(int(sys.argv[2])) if sys.argv[1] == "record" else check(sys.argv[2])
