"""Where freezeframe spends its CPU under workload (a), in record and in replay.

Run from the repository root (needs ``py-spy`` in the venv: ``.venv/bin/pip install py-spy``;
or ``--profiler cprofile``, which sees only the event-loop thread)::

    .venv/bin/python tests/benchmarks/profile_proxy.py [--requests 1000] [--out DIR]

It starts the benchmark's upstream and a freezeframe ``record`` proxy (pinned like in
``bench_proxy.py``), attaches ``py-spy record --nonblocking --threads`` once the proxy is
healthy, sends the sequential ~20 KB chat-completion POSTs of ``bench_proxy.py`` over one
connection (every body different, as in its workload (a)), and stops. Then the same with
the upstream down, in ``replay`` mode.

For each mode it prints, as a share of the proxy's busy samples (idle time excluded):

* ``owner``: each sample is charged to the innermost frame that is freezeframe's own code
  (``addons/``, ``canonicalize/``, ``storage/``) or mitmproxy's; stdlib and third-party
  frames are charged to whoever called them (``json.dumps`` under ``canonicalize`` is
  freezeframe's; ``ssl`` under mitmproxy's connection handler is mitmproxy's). Samples with
  neither (the bare event loop, uvicorn) are ``other``.
* per thread (the store's writer thread shows up on its own);
* the top freezeframe functions by cumulative (inclusive) share;
* the top mitmproxy modules by owned share.

Raw profiles (py-spy collapsed stacks, or .prof files) are kept in ``--out``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import bench_proxy as bp  # noqa: E402

OWN_DIRS = ("addons", "canonicalize", "storage", "evidence", "providers", "proxy")
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


_LIB = re.compile(r"/lib/python3\.\d+/(?:site-packages/)?")


def owner_of(path: str) -> str | None:
    """``freezeframe``, ``mitmproxy`` or None (stdlib, other libraries) for a frame's file.

    Project files are recognised by their top directory, wherever the checkout lives, so
    profiles taken in another copy of the repository read the same."""
    p = path.replace("\\", "/")
    if "/mitmproxy/" in p or p.startswith("mitmproxy/"):
        return "mitmproxy"
    if _LIB.search(p):
        return None
    root = str(bp.ROOT) + "/"
    parts = (p[len(root) :] if p.startswith(root) else p).split("/")
    return "freezeframe" if any(part in OWN_DIRS for part in parts[:-1]) else None


def short(path: str) -> str:
    p = path.replace("\\", "/")
    m = _LIB.search(p)
    if m:
        return p[m.end() :]
    parts = p.split("/")
    for i, part in enumerate(parts[:-1]):
        if part in OWN_DIRS:
            return "/".join(parts[i:])
    root = str(bp.ROOT) + "/"
    return p[len(root) :] if p.startswith(root) else p


def parse_frame(text: str) -> tuple[str, str, int]:
    m = FRAME.match(text)
    if not m:
        return text, "", 0
    return m["func"], m["file"], int(m["line"] or 0)


_BLOCKING_CALLS = re.compile(
    r"\.get\(\)|\.wait\(|\.acquire\(|\.sendmsg\(|send_fds\(|\.join\(|time\.sleep\("
)
"""A project line that blocks: the writer process's channel (storage.sql.channel) waits in
``sendmsg`` while its buffer is full, which py-spy counts as busy."""


@functools.cache
def _source_line(file: str, line: int) -> str:
    with contextlib.suppress(OSError, IndexError):
        return Path(file).read_text(errors="replace").splitlines()[line - 1]
    return ""


def is_idle(func: str, file: str, line: int) -> bool:
    """Whether a sample's innermost frame is a blocking wait rather than work.

    py-spy cannot tell reliably (with ``--nonblocking`` it counts the event loop's epoll
    wait as busy; without, a thread blocked in ``queue.get()`` counts as busy), so decide
    from the frame: the selector's poll, threading/queue waits, and a line of project code
    that is itself a blocking ``.get()``/``.wait(``/``.acquire(`` call.
    """
    name = file.replace("\\", "/").rsplit("/", 1)[-1]
    if name == "selectors.py" and func.endswith("select"):
        return True
    if name in ("threading.py", "queue.py") and func.split(".")[-1] in ("wait", "get"):
        return True
    if name == "socket.py" and func.split(".")[-1] in ("recv_fds", "send_fds"):
        return True  # the writer process's channel, waiting for the other end
    if owner_of(file) == "freezeframe" and line:
        return bool(_BLOCKING_CALLS.search(_source_line(file, line)))
    return False


def analyse_collapsed(path: Path, top: int) -> str:
    """Summarise py-spy ``--format raw`` output (one ``a;b;c count`` line per stack)."""
    total = idle = unreadable = 0
    by_owner: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    thread_owner: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    own_cum: collections.Counter[str] = collections.Counter()
    own_self: collections.Counter[str] = collections.Counter()
    mitm_module: collections.Counter[str] = collections.Counter()
    other_leaf: collections.Counter[str] = collections.Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        thread = "?"
        if frames and frames[0].startswith(("thread ", "process ")):
            while frames and frames[0].startswith(("thread ", "process ")):
                head = frames.pop(0)
                if head.startswith("thread "):
                    thread = head
        parsed = [parse_frame(f) for f in frames]
        if not parsed:  # py-spy caught the thread outside any Python frame
            unreadable += count
            continue
        if is_idle(*parsed[-1]):
            idle += count
            continue
        total += count
        by_thread[thread] += count
        # owner: innermost frame that is freezeframe's or mitmproxy's
        owner = "other"
        owned_at: tuple[str, str] | None = None
        for func, file, _line in reversed(parsed):
            who = owner_of(file)
            if who:
                owner, owned_at = who, (func, file)
                break
        by_owner[owner] += count
        thread_owner[thread][owner] += count
        if owner == "other" and parsed:
            other_leaf[short(parsed[-1][1])] += count
        if owner == "mitmproxy" and owned_at:
            mitm_module[short(owned_at[1])] += count
        if owner == "freezeframe" and owned_at:
            own_self[f"{owned_at[0]} ({short(owned_at[1])})"] += count
        seen: set[str] = set()
        for func, file, _line in parsed:
            if owner_of(file) == "freezeframe":
                key = f"{func} ({short(file)})"
                if key not in seen:
                    seen.add(key)
                    own_cum[key] += count
    if not total:
        return "no samples (is py-spy allowed to ptrace? try --profiler cprofile)\n"

    def pct(n: int) -> str:
        return f"{100 * n / total:5.1f}%"

    out = [
        f"busy samples: {total} (left out: {idle} idle in a wait, {unreadable} with no "
        "Python frame)"
    ]
    out.append("owner: " + ", ".join(f"{k} {pct(v)}" for k, v in by_owner.most_common()))
    out.append("threads:")
    for thread, n in by_thread.most_common(6):
        split = ", ".join(f"{k} {pct(v)}" for k, v in thread_owner[thread].most_common())
        out.append(f"  {pct(n)}  {thread[:60]}  [{split}]")
    out.append("top freezeframe functions, cumulative (self = charged to it as owner):")
    for key, n in own_cum.most_common(top):
        out.append(f"  {pct(n)} cum  {pct(own_self.get(key, 0))} self  {key}")
    out.append("top mitmproxy modules, owned:")
    for key, n in mitm_module.most_common(max(5, top // 2)):
        out.append(f"  {pct(n)}  {key}")
    out.append("top 'other' (no freezeframe or mitmproxy frame on the stack), by leaf module:")
    for key, n in other_leaf.most_common(max(5, top // 2)):
        out.append(f"  {pct(n)}  {key}")
    return "\n".join(out) + "\n"


def analyse_pstats(path: Path, top: int) -> str:
    import io
    import pstats

    buf = io.StringIO()
    stats = pstats.Stats(str(path), stream=buf)
    stats.sort_stats("cumulative")
    width = stats.total_tt or 1.0
    rows = []
    for (file, line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        who = owner_of(file)
        if who:
            rows.append((ct, who, f"{func} ({short(file)}:{line})"))
    rows.sort(reverse=True)
    out = [f"total profiled time (event-loop thread only): {width:.2f} s"]
    for who in ("freezeframe", "mitmproxy"):
        out.append(f"top {who} functions, cumulative:")
        for ct, _who, key in [r for r in rows if r[1] == who][:top]:
            out.append(f"  {100 * ct / width:5.1f}%  {key}")
    return "\n".join(out) + "\n"


def drive(target_url: str, proxy_url: str, ctx_cas: list[Path], warmup: int, count: int) -> str:
    import httpx

    ctx = bp.client_context(*ctx_cas)
    errors = 0
    latencies: list[float] = []
    with httpx.Client(proxy=proxy_url, verify=ctx, trust_env=False, timeout=15.0) as client:
        for n in range(warmup):
            errors += not bp.post_chat(client, target_url, bp.unique_body(n))
        for n in range(warmup, warmup + count):
            body = bp.unique_body(n)
            t0 = time.perf_counter()
            errors += not bp.post_chat(client, target_url, body)
            latencies.append(time.perf_counter() - t0)
    p50 = bp.percentile(latencies, 50) * 1000
    return f"{count} requests, p50 {p50:.2f} ms, {errors} errors"


def profile_mode(env: bp.Env, mode: str, args: argparse.Namespace, out: Path, data_dir: str) -> str:
    scenario = bp.Scenario(f"ff-{mode}", "freezeframe", ("--mode", mode), data_dir=data_dir)
    chat = f"https://127.0.0.1:{env.upstream_port}{bp.CHAT_PATH}"
    if args.profiler == "cprofile":
        prof = out / f"{mode}.prof"
        child, proxy_url, ca = _start_cprofiled(env, scenario, prof)
        try:
            summary = drive(chat, proxy_url, [env.upstream_ca, ca], args.warmup, args.requests)
        finally:
            child.stop()  # SIGTERM: freezeframe exits cleanly, so cProfile writes its file
        return summary + "\n" + analyse_pstats(prof, args.top)
    child, proxy_url, ca = env.start(scenario)
    assert child is not None and proxy_url is not None
    raw = out / f"{mode}.collapsed.txt"
    pyspy = shutil.which("py-spy", path=str(bp.BIN)) or shutil.which("py-spy")
    if not pyspy:
        raise SystemExit("py-spy not found: .venv/bin/pip install py-spy, or --profiler cprofile")
    cmd = [
        pyspy, "record", "--pid", str(child.pid), "--rate", str(args.rate), *args.pyspy_extra,
        *(["--subprocesses"] if args.subprocesses else []),
        "--threads", "--full-filenames", "--format", "raw", "-o", str(raw),
    ]  # fmt: skip
    spy = bp.Child(f"py-spy {mode}", cmd, out / f"py-spy-{mode}.log", env.cpu(bp.CLIENT_CPU))
    env.children.append(spy.start())
    try:
        time.sleep(1.0)  # let py-spy attach
        cpu0, wall0 = child.cpu_seconds(), time.perf_counter()
        summary = drive(chat, proxy_url, [env.upstream_ca, ca], args.warmup, args.requests)
        cpu, wall = child.cpu_seconds() - cpu0, time.perf_counter() - wall0
        summary += (
            f"; the proxy used {cpu:.2f} s CPU in {wall:.2f} s (psutil), i.e. "
            f"{cpu / max(1, args.requests + args.warmup) * 1000:.2f} ms per request; "
            f"at {args.rate} Hz that is about {cpu * args.rate:.0f} busy samples"
        )
    finally:
        if spy.proc is not None and spy.proc.poll() is None:
            spy.proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.proc.wait(timeout=20.0)
        spy.kill()
        child.stop()
    if not raw.exists():
        return summary + "\npy-spy wrote nothing:\n" + spy.log_tail()
    return summary + "\n" + analyse_collapsed(raw, args.top)


def _start_cprofiled(env: bp.Env, scenario: bp.Scenario, prof: Path) -> tuple[bp.Child, str, Path]:
    """Like ``Env.start`` for freezeframe, with ``-m cProfile -o prof`` before ``-m cli``."""
    real = sys.executable
    port, admin = bp.free_port(), bp.free_port()
    data_dir = env.tmp / scenario.data_dir
    cmd = [
        real, "-m", "cProfile", "-o", str(prof), "-m", "freezeframe", "run",
        "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}",
        "--admin", f"127.0.0.1:{admin}", "--upstream-ca", str(env.upstream_ca),
        *scenario.args,
    ]  # fmt: skip
    child = bp.Child(scenario.name, cmd, env.tmp / f"{scenario.name}.log", env.cpu(bp.PROXY_CPU))
    env.children.append(child.start())

    def healthy() -> bool:
        import httpx

        with httpx.Client(trust_env=False, timeout=1.0) as c:
            return c.get(f"http://127.0.0.1:{admin}/health").status_code == 200

    bp.wait_until(healthy, bp.START_TIMEOUT, "waiting for /health", child)
    return child, f"http://127.0.0.1:{port}", data_dir / "mitmproxy-ca-cert.pem"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiler", choices=["py-spy", "cprofile"], default="py-spy")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument(
        "--blocking",
        dest="pyspy_extra",
        action="store_const",
        const=[],
        default=["--nonblocking"],
        help="let py-spy pause the proxy for every sample (default: --nonblocking, which "
        "perturbs the proxy far less; idle waits are recognised from the frames either way)",
    )
    parser.add_argument(
        "--subprocesses",
        action="store_true",
        help="sample the store's writer process too (py-spy --subprocesses); its threads "
        "show as threads of their own",
    )
    parser.add_argument("--out", metavar="DIR", help="keep the raw profiles here")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args(argv)

    import os

    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    if pin:
        os.sched_setaffinity(0, {bp.CLIENT_CPU})
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="freezeframe-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="freezeframe-profile-work-") as tmp:
        env = bp.Env(Path(tmp), pin)
        try:
            env.start_upstream()
            print(f"== record ({args.profiler})")
            print(profile_mode(env, "record", args, out, "data"), flush=True)
            env.stop_upstream()
            print(f"== replay, upstream down ({args.profiler})")
            print(profile_mode(env, "replay", args, out, "data"), flush=True)
        finally:
            env.close()
    print(f"raw profiles in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
