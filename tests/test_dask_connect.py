"""``--dask ADDRESS`` that is not a scheduler is one line naming ``--dask``, in bounded time.

Measured before: an address that accepts the connection and never answers (a firewall, a stuck
process) held ``pipesim sweep --dask`` and ``pipesim plan --dask`` for over 90 s with no word, since
Dask's 10 s timeout covers only the connection; the dashboard's port (8787, HTTP) made Dask read
"HTTP/1.1 400" as a frame length and fail to allocate 3.07 EiB: a MemoryError traceback from
``pipesim plan`` and ``pipesim: error: MemoryError: ...`` from ``pipesim sweep``. Both peers run
here in a thread; the connect limit is lowered so that no test waits 10 s.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed")

import pipesim.io.cli_options as cli_options  # noqa: E402 - after the skip
import pipesim.plan as plan  # noqa: E402
from pipesim.io.cli import main  # noqa: E402
from pipesim.io.cli_options import DaskError, open_dask  # noqa: E402

LIMIT_S = 0.5
BOUND_S = LIMIT_S + 5.0  # the limit, Dask's own timeout's grace, and a loaded machine's slack

SPEC = """
[cluster]
gpu = "h100-sxm"
n_gpus = 8
[model]
name = "qwen3-0.6b"
max_model_len = 4096
[workload]
prompts_per_step = 8
samples_per_prompt = 4
prompt_tokens = 256
response = { median_tokens = 300, sigma = 0.5 }
max_response_tokens = 2048
[constraints]
max_staleness = 2
[space]
placement = [4]
eta = [0]
update = ["drain"]
[search]
method = "grid"
steps = 4
screen_steps = 2
seeds = 1
"""


def _serve(answer: bytes | None) -> Iterator[str]:
    """A TCP server on a free local port, as ``tcp://127.0.0.1:PORT``: it accepts every
    connection and then says nothing (``answer`` None) or reads the request and sends ``answer``."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)
    stop = threading.Event()
    held: list[socket.socket] = []

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:  # the accept timed out: look at stop again
                continue
            held.append(conn)
            if answer is not None:
                conn.settimeout(2)
                try:
                    conn.recv(200)
                    conn.sendall(answer)
                except OSError:
                    pass
                conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


@pytest.fixture
def silent() -> Iterator[str]:
    yield from _serve(None)


@pytest.fixture
def web() -> Iterator[str]:
    yield from _serve(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")


@pytest.fixture
def short_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_options, "DASK_CONNECT_TIMEOUT_S", LIMIT_S)


def _refused(address: str) -> tuple[str, float]:
    t0 = time.monotonic()
    with pytest.raises(DaskError) as info:
        open_dask(address, 1, timeout_s=LIMIT_S)
    return str(info.value), time.monotonic() - t0


def test_a_peer_that_never_answers_is_refused_within_the_limit(silent: str) -> None:
    message, took = _refused(silent)
    assert took < BOUND_S, took
    assert message.startswith("--dask: cannot connect to the Dask scheduler at ")
    assert f"{silent} within {LIMIT_S:g} s" in message and "handshake" in message
    assert "\n" not in message


def test_an_http_server_is_named_as_not_a_scheduler(web: str) -> None:
    message, took = _refused(web)
    assert took < BOUND_S, took
    assert message.startswith(f"--dask {web}: not a Dask scheduler (it answered 'HTTP/1.1 400 Bad Request'")
    assert "the dashboard is usually port 8787, the scheduler 8786" in message
    assert "MemoryError" not in message and "EiB" not in message and "\n" not in message


@pytest.mark.parametrize("peer", ["silent", "web"])
def test_pipesim_sweep_says_so_in_one_line(
    peer: str, request: pytest.FixtureRequest, short_limit: None, capsys: pytest.CaptureFixture[str]
) -> None:
    address = request.getfixturevalue(peer)
    t0 = time.monotonic()
    rc = main(
        ["sweep", "synchronous", "--set", "steps=2", "--quiet", "--dask", address, "--timeout-s", "none"]
    )
    assert time.monotonic() - t0 < BOUND_S
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("pipesim: error: --dask") and address in err[0]
    assert ("within 0.5 s" if peer == "silent" else "not a Dask scheduler") in err[0]


@pytest.mark.parametrize("peer", ["silent", "web"])
def test_pipesim_plan_says_so_in_one_line(
    peer: str,
    request: pytest.FixtureRequest,
    short_limit: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    address = request.getfixturevalue(peer)
    spec = tmp_path / "small.toml"
    spec.write_text(SPEC)
    t0 = time.monotonic()
    rc = plan.main([str(spec), "--quiet", "--no-cache", "--dask", address])
    assert time.monotonic() - t0 < BOUND_S
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("pipesim plan: error: --dask") and address in err[0]
    assert ("within 0.5 s" if peer == "silent" else "not a Dask scheduler") in err[0]
