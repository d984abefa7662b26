"""A Responses API run chained by ``previous_response_id``: the model live, the rest frozen.

The live model mints new ids; the agent names them in its next requests (the next turn's
``previous_response_id``, the note it files under the answer's id). The proxy pairs each
live id with the recorded one, so the frozen tools still answer, and ``diff`` says which
id stood for which.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme
from support.proxy import ProxyProcess
from support.responses_world import AGENT, TOOL, Desk, ResponsesModel

pytestmark = pytest.mark.e2e

ANSWER = "201 Your order ord_8821 is processing."


@pytest.fixture
def model(upstream_ca: trustme.CA) -> Iterator[ResponsesModel]:
    server = ResponsesModel(upstream_ca).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def desk(upstream_ca: trustme.CA) -> Iterator[Desk]:
    server = Desk(upstream_ca).start()
    try:
        yield server
    finally:
        server.stop()


def run_agent(
    proxy: ProxyProcess, model: ResponsesModel, desk: Desk, *, stream: bool = False
) -> str:
    from freezeframe.proxy.trust import client_bundle

    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env |= proxy.client_env(client_bundle(proxy.data_dir))
    done = subprocess.run(
        [sys.executable, "-c", AGENT, model.base_url, desk.base_url, json.dumps(TOOL)]
        + (["stream"] if stream else []),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def freezeframe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "freezeframe", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_a_live_model_s_new_ids_stand_for_the_recorded_ones_in_the_frozen_rest(
    start_proxy: Callable[..., ProxyProcess],
    model: ResponsesModel,
    desk: Desk,
    data_dir: Path,
    stream: bool,
) -> None:
    recorder = start_proxy(mode="record", cassette="run")
    assert run_agent(recorder, model, desk, stream=stream) == ANSWER
    recorder.stop()
    recorded_ids = list(model.known)
    asked = len(model.requests)

    model_host = model.base_url.removeprefix("https://")
    proxy = start_proxy(
        mode="replay", cassette="run", args=("--live", model_host, "--record-into", "live")
    )
    assert run_agent(proxy, model, desk, stream=stream) == ANSWER, (
        "the note under the new id was replayed"
    )
    proxy.stop()
    assert len(model.requests) == asked + 2, "both turns went to the live model"
    live_ids = [i for i in model.known if i not in recorded_ids]
    assert model.requests[-1][2]["previous_response_id"] == live_ids[0]
    assert len(desk.requests) == 2, "the tools were asked only when the run was recorded"
    log = proxy.log_path.read_text()
    assert f"live {live_ids[1]} stands for {recorded_ids[1]} of run#2" in log

    answer = json.loads(freezeframe(data_dir, "show", "run", "0", "--json").stdout)["response"]
    media = dict((k.lower(), v) for k, v in answer["headers"])["content-type"]
    assert media == ("text/event-stream" if stream else "application/json")

    compared = freezeframe(data_dir, "diff", "run", "live")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert f"response id: {recorded_ids[0]} -> {live_ids[0]}" in compared.stdout
    shown = json.loads(freezeframe(data_dir, "diff", "run", "live", "--json").stdout)
    note = shown["steps"][3]  # the tool request that names the live response's id
    assert note["request"] == [] and not note["diverges"]  # read by role: the same request
    strict = json.loads(freezeframe(data_dir, "diff", "run", "live", "--json", "--strict").stdout)
    assert [c["what"] for c in strict["steps"][3]["request"]] == ["$.response_id"]

    alone = start_proxy(mode="replay", cassette="live")
    assert run_agent(alone, model, desk, stream=stream) == ANSWER, "the new run replays on its own"
    alone.stop()
    assert len(model.requests) == asked + 2 and len(desk.requests) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_a_resent_answer_s_new_ids_stand_for_the_recorded_ones_in_its_fork(
    start_proxy: Callable[..., ProxyProcess],
    model: ResponsesModel,
    desk: Desk,
    data_dir: Path,
    upstream_ca_file: Path,
    stream: bool,
) -> None:
    """``resend --fork`` of the run's first model step: the model mints new ids, resend
    prints which stands for which, and the fork replays the agent whole (its second turn and
    its note name the new ids) with nothing sent upstream."""
    recorder = start_proxy(mode="record", cassette="run")
    assert run_agent(recorder, model, desk, stream=stream) == ANSWER
    recorder.stop()
    recorded_ids = list(model.known)
    asked = len(model.requests)

    resent = freezeframe(
        data_dir, "resend", "run", "0", "--into", "fork", "--fork",
        "--header", "Authorization: Bearer sk-responses-agent",
        "--upstream-ca", str(upstream_ca_file),
    )  # fmt: skip
    assert resent.returncode == 0, resent.stdout + resent.stderr
    assert len(model.requests) == asked + 1
    new_id = next(i for i in model.known if i not in recorded_ids)
    assert resent.stdout.startswith("resent run#0: 200 complete, recorded as fork#0 in a fork")
    assert f"  {new_id} stands for {recorded_ids[0]}\n" in resent.stdout
    mapped = json.loads(
        freezeframe(
            data_dir, "resend", "run", "0", "--into", "fork-json", "--fork", "--json",
            "--header", "Authorization: Bearer sk-responses-agent",
            "--upstream-ca", str(upstream_ca_file),
        ).stdout
    )  # fmt: skip
    assert [kind for kind, _ in (pair[0].split("_", 1) for pair in mapped["ids"])] == [
        "resp", "fc", "call",
    ]  # fmt: skip

    replayer = start_proxy(mode="replay", cassette="fork")
    assert run_agent(replayer, model, desk, stream=stream) == ANSWER
    replayer.stop()
    assert len(model.requests) == asked + 2, "the fork replayed with nothing sent upstream"
    assert len(desk.requests) == 2
    assert f"fork#0's new {new_id} stands for {recorded_ids[0]} of run#0" in (
        replayer.log_path.read_text()
    )
