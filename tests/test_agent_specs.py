"""Agent specs: the shipped LLM agents of the original paper, and clear errors for bad ones."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from runner.config import REPO_ROOT
from runner.errors import SpecError
from runner.registry import list_agents
from runner.specs import AgentSpec, load_yaml_model

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
    llm = [a for a in list_agents(REPO_ROOT / "agents") if a.kind == "llm"]
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
        ("kind: command\ncommand: [x]\nsecrets: {K: HOST_K}\n", "give 'egress.allow' too"),
        ("kind: baseline\ncommand: [x]\negress: {allow: [h]}\n", "only for agent kind 'command'"),
        ("kind: command\ncommand: [x]\negress: {allow: []}\n", "egress.allow"),
    ],
)
def test_a_bad_agent_spec_names_the_file_and_the_problem(tmp_path: Path, body: str, message: str):
    path = write(tmp_path, BASE + body)
    with pytest.raises(SpecError) as err:
        load_yaml_model(path, AgentSpec)
    assert str(path) in str(err.value) and message in str(err.value)


def test_the_readme_example_of_a_local_model_is_a_valid_agent(tmp_path: Path):
    readme = (REPO_ROOT / "README.md").read_text()
    block = readme.split("```yaml\n# agents/ollama", 1)[1].split("```", 1)[0]
    agent = load_yaml_model(write(tmp_path, "# agents/ollama" + block), AgentSpec)
    assert agent.kind == "llm" and agent.llm.api_key_env is None
    assert agent.llm.base_url.startswith("http://127.0.0.1:")
