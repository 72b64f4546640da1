"""What a sandbox backend reads of its engine's report on the agent's process, parsed once into a
model: bwrap's status documents (runner.sandbox.launcher.LaunchStatus) and ``docker inspect``'s
``.State`` (runner.sandbox.docker_engine.ContainerState). No answer crashes the reader."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.sandbox.docker_engine import ContainerState
from runner.sandbox.launcher import LaunchStatus, parse_status

# As Docker 20.10 printed them on this machine (`docker create`, then `docker start -a`), the
# second with its exit made an OOM kill's (ExitCode 137, OOMKilled true).
CREATED = (
    '{"Status":"created","Running":false,"Paused":false,"Restarting":false,"OOMKilled":false,'
    '"Dead":false,"Pid":0,"ExitCode":0,"Error":"","StartedAt":"0001-01-01T00:00:00Z",'
    '"FinishedAt":"0001-01-01T00:00:00Z"}'
)
EXITED = (
    '{"Status":"exited","Running":false,"Paused":false,"Restarting":false,"OOMKilled":true,'
    '"Dead":false,"Pid":0,"ExitCode":137,"Error":"","StartedAt":"2026-12-05T20:45:51.141144606Z",'
    '"FinishedAt":"2026-12-05T20:45:51.144354899Z"}'
)


def test_the_engines_state_of_a_container_never_started_and_of_one_that_ran():
    created = ContainerState.parse(CREATED)
    assert not created.started and created.exit_code == 0 and not created.oom_killed
    exited = ContainerState.parse(EXITED)
    assert exited.started and (exited.exit_code, exited.oom_killed, exited.error) == (137, True, "")


def test_what_does_not_parse_is_an_unknown_state():
    for text in ("", "not json", "[]", '{"ExitCode": "137"}', '{"OOMKilled": 1}'):
        state = ContainerState.parse(text)
        assert state == ContainerState() and not state.started and state.exit_code is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=10,
)
KEYS = st.sampled_from(["StartedAt", "Error", "ExitCode", "OOMKilled", "Status", "Pid"])


# 150 generated answers: objects with the State's keys and values of any kind, and any JSON.
@settings(max_examples=150, deadline=None)
@given(answer=st.dictionaries(KEYS, JSON, max_size=5) | JSON)
def test_any_answer_is_a_state(answer):
    state = ContainerState.parse(json.dumps(answer))
    assert isinstance(state.started, bool) and isinstance(state.error, str)
    assert state.exit_code is None or type(state.exit_code) is int
    assert type(state.oom_killed) is bool


# As bubblewrap 0.8 wrote them on this machine (--json-status-fd), after the launcher's "ok".
BWRAP_STATUS = (
    b'ok\n{ "child-pid": 19897, "cgroup-namespace": 4026532259, "ipc-namespace": 4026532190, '
    b'"mnt-namespace": 4026532184, "net-namespace": 4026532260, "pid-namespace": 4026532255, '
    b'"uts-namespace": 4026532188 }\n{ "exit-code": 2 }\n'
)


def test_bwraps_status_names_its_child_and_its_exit():
    assert parse_status(BWRAP_STATUS) == LaunchStatus(launched=True, child_pid=19897, exit_code=2)
    assert parse_status(b"ok\n") == LaunchStatus(launched=True)  # not bwrap, or it never started
    assert parse_status(b"") == LaunchStatus(launched=False)  # the launcher failed first
    # What is not bwrap's shape is skipped; what is not JSON ends the reading.
    odd = (
        b'ok\n[1]\n{"child-pid": "7"}\n{"child-pid": 7}\n{"exit-code": 1} garbage {"exit-code": 9}'
    )
    assert parse_status(odd) == LaunchStatus(launched=True, child_pid=7, exit_code=1)


# 150 generated pipes: "ok" and JSON documents of any shape, then maybe bytes that are no JSON.
@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(
        st.dictionaries(st.sampled_from(["child-pid", "exit-code", "x"]), JSON) | JSON, max_size=4
    ),
    tail=st.binary(max_size=20),
)
def test_any_status_pipe_is_a_launch_status(docs, tail):
    raw = b"ok\n" + b"\n".join(json.dumps(doc).encode() for doc in docs) + tail
    status = parse_status(raw)
    assert status.launched
    for value in (status.child_pid, status.exit_code):
        assert value is None or type(value) is int
