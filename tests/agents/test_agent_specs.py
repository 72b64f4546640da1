"""Agent specs: the shipped LLM agents of the original paper, and clear errors for bad ones."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from runner.config import REPO_ROOT
from runner.errors import SpecError
from runner.specs import AgentSpec, load_yaml_model
from runner.specs.registry import list_agents

PAPER_MODELS = {
    "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8": dt.date(2025, 1, 22),
    "openai/gpt-oss-120b-TEE": dt.date(2024, 6, 1),
    "zai-org/GLM-4.7-FP8": dt.date(2025, 4, 1),
    "zai-org/GLM-4.7-Flash": dt.date(2025, 4, 1),
    "MiniMaxAI/MiniMax-M2.1-TEE": dt.date(2025, 6, 25),
    "zai-org/GLM-4.6-FP8": dt.date(2025, 4, 1),
    "deepseek-ai/DeepSeek-V3.1-Terminus": dt.date(2024, 7, 1),
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": dt.date(2025, 6, 25),
    "mistralai/Devstral-2-123B-Instruct-2512-TEE": dt.date(2023, 10, 1),
    "tngtech/DeepSeek-TNG-R1T2-Chimera": dt.date(2024, 7, 1),
}


def test_the_ten_models_of_the_paper_are_shipped_as_llm_agents_on_chutes():
    llm = [a for a in list_agents(REPO_ROOT / "agents").specs if a.kind == "llm"]
    assert {a.model.model_id: a.model.knowledge_cutoff for a in llm} == PAPER_MODELS
    for agent in llm:
        assert agent.model.provider == "chutes" and agent.llm is not None
        assert agent.llm.base_url == "https://llm.chutes.ai/v1"
        assert agent.llm.api_key_env == "CHUTES_API_KEY"
        assert not agent.trusted and not agent.command


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return path


BASE = "id: a\ntitle: t\nharness: h\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("kind: llm\nmodel: {model_id: m}\n", "needs an 'llm' block"),
        ("kind: llm\nllm: {base_url: 'http://x/v1'}\n", "needs model.model_id"),
        ("kind: llm\nmodel: {model_id: m}\nllm: {base_url: 'ftp://x'}\n", "llm.base_url must"),
        (
            "kind: llm\nmodel: {model_id: m}\nllm: {base_url: 'http://x/v1', prices: {input_per_mtok: -1, output_per_mtok: 1}}\n",
            "llm.prices.input_per_mtok",
        ),
        (
            "kind: baseline\ncommand: [x]\nllm: {base_url: 'http://x'}\n",
            "only for agent kind 'llm'",
        ),
        ("kind: command\ncommand: [x]\nsecrets: {K: HOST_K}\n", "no key ever enters the sandbox"),
        ("kind: baseline\ncommand: [x]\negress: {allow: [h]}\n", "only for agent kind 'command'"),
        ("kind: baseline\ncommand: [x]\nenv: {A: b}\n", "env: only for agent kind 'command'"),
        ("kind: command\ncommand: ['{modle}']\n", "unknown placeholder(s) {modle}"),
        ("kind: command\ncommand: [x]\nenv: {A: '{gateway_url}'}\n", "no 'gateway' is given"),
        ("kind: command\ncommand: [x]\nfiles: {'../x': y}\n", "relative to HOME"),
        (
            "kind: command\ncommand: [x]\ncli: {npm: a, pypi: b, version: '1', bin: a}\n",
            "exactly one of",
        ),
        (
            "kind: command\ncommand: [x]\ncli: {npm: a, version: '^1.2', bin: a}\n",
            "one exact version",
        ),
        (
            "kind: command\ncommand: [x]\ncli: {pypi: a, version: '1', bin: a, requirements: [b]}\n",
            "exact pins",
        ),
        (
            "kind: command\ncommand: [x]\ngateway: {protocol: openai-chat, base_url: 'x.com'}\n",
            "gateway.base_url must",
        ),
        (
            "kind: command\ncommand: [x]\ngateway: {protocol: grpc, base_url: 'http://x'}\n",
            "gateway.protocol",
        ),
    ],
)
def test_a_bad_agent_spec_names_the_file_and_the_problem(tmp_path: Path, body: str, message: str):
    path = write(tmp_path, BASE + body)
    with pytest.raises(SpecError) as err:
        load_yaml_model(path, AgentSpec)
    assert str(path) in str(err.value) and message in str(err.value)


def test_the_readme_example_of_a_local_model_is_a_valid_agent(tmp_path: Path):
    readme = (REPO_ROOT / "agents" / "README.md").read_text()
    block = readme.split("```yaml\n# agents/ollama", 1)[1].split("```", 1)[0]
    agent = load_yaml_model(write(tmp_path, "# agents/ollama" + block), AgentSpec)
    assert agent.kind == "llm" and agent.llm.api_key_env is None
    assert agent.llm.base_url.startswith("http://127.0.0.1:")


def test_templates_fill_known_fields_and_leave_other_braces_alone():
    from runner.agents.templates import fill

    fields = {"gateway_url": "http://127.0.0.1:18081/v1", "model": "m"}
    text = '{"provider": {"x": {"baseURL": "{gateway_url}"}}} {{model}} {model} {other} ${HOME}'
    assert fill(text, fields) == (
        '{"provider": {"x": {"baseURL": "http://127.0.0.1:18081/v1"}}} {model} m {other} ${HOME}'
    )


def test_every_shipped_cli_agent_is_pinned_and_reaches_its_provider_only_through_the_gateway():
    from runner.specs.registry import list_agents

    clis = [a for a in list_agents(REPO_ROOT / "agents").specs if a.kind == "command"]
    assert clis
    for agent in clis:
        assert agent.cli is not None and agent.gateway is not None, agent.id
        assert agent.cli.version[0].isdigit(), agent.id
        text = " ".join((*agent.command, *agent.env.values(), *agent.files.values()))
        assert (
            "{gateway_url}" in text and "{gateway_key}" in text
        ) or agent.gateway.api_key_env is None
        assert agent.gateway.base_url not in text, f"{agent.id} names its provider directly"
