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
import os
import subprocess
import sys
import threading
import time
import urllib.request

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


def through(name: str) -> dict[str, str]:
    """The environment that sends the SDK through one replica (a process per replica: the
    SDK reads the proxy from the environment)."""
    proxy = f"http://{name}:8080"
    return {**os.environ, "HTTPS_PROXY": proxy, "https_proxy": proxy}


def ask(openai: OpenAI, i: int) -> str:
    reply = openai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": f"request {i}"}]
    )
    return str(reply.choices[0].message.content)


def worker(name: str, numbers: list[int]) -> None:
    """One replica's share, in this process: a JSON line per answer, `failed` otherwise."""
    openai = OpenAI(max_retries=0, timeout=30)
    for i in numbers:
        try:
            answer = ask(openai, i)
        except Exception as error:
            print(f"failed {i} via {name}: {type(error).__name__}", flush=True)
            continue
        print(json.dumps({"i": i, "via": name, "answer": answer}), flush=True)


def run_workers(shares: dict[str, list[int]]) -> list[str]:
    """A worker process per replica, at once; their lines as they come, and returned."""
    lines: list[str] = []
    lock = threading.Lock()

    def relay(name: str, numbers: list[int]) -> None:
        command = [sys.executable, __file__, "worker", name, *map(str, numbers)]
        with subprocess.Popen(
            command, env=through(name), stdout=subprocess.PIPE, text=True
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                with lock:
                    print(line, end="", flush=True)
                    lines.append(line)

    threads = [threading.Thread(target=relay, args=item) for item in shares.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return lines


def record(count: int) -> None:
    for name in REPLICAS:
        wait_healthy(name)
    print("load agent: all replicas healthy", flush=True)
    run_workers({name: list(range(n, count, len(REPLICAS))) for n, name in enumerate(REPLICAS)})


def is_answer(line: str) -> bool:
    return line.startswith("{")


def check(path: str) -> None:
    with open(path) as lines:
        acknowledged = {a["i"]: a for a in map(json.loads, filter(is_answer, lines))}
    for name in REPLICAS:
        wait_healthy(name)
    numbers = sorted(acknowledged)
    shares = {name: numbers[n :: len(REPLICAS)] for n, name in enumerate(REPLICAS)}
    replayed = {}
    for line in run_workers(shares):
        if is_answer(line):
            answer = json.loads(line)
            replayed[answer["i"]] = answer["answer"]
    wrong = [i for i in numbers if replayed.get(i) != acknowledged[i]["answer"]]
    for i in wrong:
        recorded = acknowledged[i]["answer"]
        print(f"request {i}: replayed {replayed.get(i)!r}, acknowledged {recorded!r}")
    print(f"load agent: {len(numbers) - len(wrong)} of {len(numbers)} replayed identical")
    sys.exit(1 if wrong or not numbers else 0)


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        worker(sys.argv[2], [int(n) for n in sys.argv[3:]])
    elif sys.argv[1] == "record":
        record(int(sys.argv[2]))
    else:
        check(sys.argv[2])
