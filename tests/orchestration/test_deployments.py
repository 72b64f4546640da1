"""The scale-out configs in orchestration/deployments/ are valid for the Dagster we lock.

Each ``dagster.yaml`` is validated by Dagster's own instance-config loader and its run
launcher's config schema; the Kubernetes Job the K8sRunLauncher would submit is rendered
from it; the Docker files only reference files that exist. No Docker daemon, no cluster.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster._core.instance.ref import InstanceRef
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

from runner.config import REPO_ROOT

DEPLOYMENTS = REPO_ROOT / "orchestration" / "deployments"
DOCKER = DEPLOYMENTS / "docker"
K8S = DEPLOYMENTS / "k8s"

POSTGRES_ENV = {
    "DAGSTER_POSTGRES_HOST": "postgres",
    "DAGSTER_POSTGRES_USER": "dagster",
    "DAGSTER_POSTGRES_PASSWORD": "secret",
    "DAGSTER_POSTGRES_DB": "dagster",
    "DAGSTER_CURRENT_IMAGE": "tmlbench-user-code:test",
}
SANDBOX_ENV = ("TMLBENCH_DATA_DIR", "TMLBENCH_RUNS_DIR", "TMLBENCH_WAREHOUSE")


@pytest.fixture(autouse=True)
def _instance_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in POSTGRES_ENV.items():
        monkeypatch.setenv(key, value)


def instance_config(folder: Path) -> dict[str, Any]:
    """Dagster's own validation of an instance dagster.yaml (raises on any schema error)."""
    config, custom_class = dagster_instance_config(str(folder))
    assert custom_class is None
    return dict(config)


def launcher_config(config: dict[str, Any], launcher_cls: type) -> dict[str, Any]:
    """The run launcher's config checked and resolved by the launcher's own schema."""
    result = process_config(launcher_cls.config_type(), config["run_launcher"]["config"])
    assert result.success, result.errors
    return dict(result.value)


def storage_classes(folder: Path) -> dict[str, type]:
    """The class of each storage an instance of ``folder``'s dagster.yaml makes, as the instance
    reference handed to every run worker names it."""
    ref = InstanceRef.from_dir(str(folder))
    named = {
        "runs": ref.run_storage_data,
        "event logs": ref.event_storage_data,
        "schedules": ref.schedule_storage_data,
    }
    return {
        what: getattr(importlib.import_module(data.module_name), data.class_name)
        for what, data in named.items()
        if data is not None
    }


@pytest.mark.parametrize("folder", [DOCKER, K8S], ids=["docker", "k8s"])
def test_instance_config_is_valid(folder: Path) -> None:
    config = instance_config(folder)
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    # scale-out needs shared storage: every storage is dagster-postgres's (or one of it)
    postgres = {
        "runs": PostgresRunStorage,
        "event logs": PostgresEventLogStorage,
        "schedules": PostgresScheduleStorage,
    }
    classes = storage_classes(folder)
    assert set(classes) == set(postgres)
    for what, cls in classes.items():
        assert issubclass(cls, postgres[what]), (what, cls)


def test_the_docker_deployment_keeps_its_postgres_connections() -> None:
    """Its storages are the pooled ones, named one by one: a unified ``storage: custom`` would
    go through Dagster's legacy adapters, whose event log has no concurrency pools."""
    from orchestration import postgres_storage

    assert storage_classes(DOCKER) == {
        "runs": postgres_storage.PooledPostgresRunStorage,
        "event logs": postgres_storage.PooledPostgresEventLogStorage,
        "schedules": postgres_storage.PooledPostgresScheduleStorage,
    }
    assert "storage" not in instance_config(DOCKER)


@pytest.mark.parametrize("folder", [DOCKER, K8S], ids=["docker", "k8s"])
def test_duckdb_pool_limited_to_one(folder: Path) -> None:
    """DuckDB has one writer per file: the pool the warehouse assets use allows one op."""
    from dagster._core.instance.config import ConcurrencyConfig

    config = instance_config(folder)
    pools = config["concurrency"]["pools"]
    assert pools["default_limit"] == 1
    assert pools.get("granularity", "op") == "op"
    # As the instance itself reads it.
    parsed = ConcurrencyConfig.from_concurrency_settings(config["concurrency"], None)
    assert parsed.pool_config.default_pool_limit == 1
    assert "duckdb 1" in (folder / "dagster.yaml").read_text()


def test_definitions_use_only_the_duckdb_and_attempts_pools() -> None:
    """``default_limit: 1`` is the limit of every pool: each pool here must want exactly that.

    Every asset that writes the warehouse (raw load, dbt models, snapshot) is in ``duckdb``;
    agent runs are in ``attempts`` (one step at a time pins a host's CPUs; its attempts run in
    parallel inside it).
    """
    from orchestration.definitions import defs

    graph = defs.resolve_asset_graph()
    pools = {
        key.to_user_string(): set(graph.get(key).pools or ()) for key in graph.get_all_asset_keys()
    }
    assert set().union(*pools.values()) == {"duckdb", "attempts"}, "a new pool needs a limit here"
    for key in ("raw/runs", "raw/tasks", "raw/agents", "marts/leaderboard", "marts_snapshot"):
        assert pools[key] == {"duckdb"}, key
    # attempts pin CPUs from one pool per process: one agent_runs step at a time per host
    assert pools["demo/agent_runs"] == {"attempts"}
    assert pools["demo/prepared_tasks"] == set()


def test_pool_limit_applies_to_a_real_instance(tmp_path: Path) -> None:
    """An instance with the deployments' concurrency section gives the duckdb pool 1 slot."""
    import dagster as dg

    concurrency = instance_config(DOCKER)["concurrency"]
    (tmp_path / "dagster.yaml").write_text(
        yaml.safe_dump(
            {"concurrency": {"pools": concurrency["pools"]}, "telemetry": {"enabled": False}}
        )
    )
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
        instance.event_log_storage.set_concurrency_slots("duckdb", 1)
        info = instance.event_log_storage.get_concurrency_info("duckdb")
        assert info.slot_count == 1


def test_docker_run_launcher_config() -> None:
    from dagster_docker import DockerRunLauncher

    config = instance_config(DOCKER)
    assert config["run_launcher"]["module"] == "dagster_docker"
    assert config["run_launcher"]["class"] == "DockerRunLauncher"
    value = launcher_config(config, DockerRunLauncher)
    assert value["image"] == POSTGRES_ENV["DAGSTER_CURRENT_IMAGE"]
    kwargs = value["container_kwargs"]
    # Never privileged; attempts run in sibling containers (docker backend), so the run
    # container keeps Docker's seccomp and AppArmor profiles and only the capabilities the
    # workspace handover needs (README.md, "Sandboxing inside a container").
    assert kwargs.get("privileged", False) is False
    assert not any("unconfined" in opt for opt in kwargs["security_opt"])
    assert "no-new-privileges=true" in kwargs["security_opt"]
    assert kwargs["cap_drop"] == ["ALL"]
    assert set(kwargs.get("cap_add", [])) <= {"CHOWN", "DAC_OVERRIDE", "FOWNER"}
    for limit in ("nano_cpus", "mem_limit", "pids_limit"):
        assert kwargs[limit]
    mounts = {v.split(":")[1] for v in kwargs["volumes"]}
    assert {"/srv/tmlbench/data", "/srv/tmlbench/runs", "/srv/tmlbench/warehouse"} <= mounts
    env = {e.split("=")[0] for e in value["env_vars"]}
    assert set(SANDBOX_ENV) <= env
    # The launcher accepts it (validates network/container_kwargs; no daemon contacted).
    launcher = DockerRunLauncher(**value)
    assert launcher.networks == ["tmlbench_dagster"]


def render_k8s_job() -> Any:
    """The Job the K8sRunLauncher would submit, built by dagster_k8s from k8s/dagster.yaml."""
    from dagster_k8s import K8sRunLauncher
    from dagster_k8s.container_context import K8sContainerContext
    from dagster_k8s.job import (
        DagsterK8sJobConfig,
        UserDefinedDagsterK8sConfig,
        construct_dagster_k8s_job,
    )

    config = instance_config(K8S)
    assert config["run_launcher"]["module"] == "dagster_k8s"
    assert config["run_launcher"]["class"] == "K8sRunLauncher"
    c = launcher_config(config, K8sRunLauncher)
    context = K8sContainerContext(
        image_pull_policy=c.get("image_pull_policy"),
        service_account_name=c.get("service_account_name"),
        env_config_maps=c.get("env_config_maps"),
        env_secrets=c.get("env_secrets"),
        env_vars=c.get("env_vars"),
        volume_mounts=c.get("volume_mounts"),
        volumes=c.get("volumes"),
        labels=c.get("labels"),
        namespace=c.get("job_namespace"),
        resources=c.get("resources"),
        security_context=c.get("security_context"),
        run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(c.get("run_k8s_config") or {}),
    )
    job_config = DagsterK8sJobConfig(
        job_image="tmlbench-user-code:test",
        dagster_home=c["dagster_home"],
        instance_config_map=c["instance_config_map"],
        postgres_password_secret=c["postgres_password_secret"],
    )
    job = construct_dagster_k8s_job(
        job_config=job_config,
        args=["dagster", "api", "execute_run", "{}"],
        job_name="dagster-run-test",
        user_defined_k8s_config=context.run_k8s_config,
        component="run_worker",
    )
    return job


def test_k8s_run_launcher_renders_a_job() -> None:
    """The Job the K8sRunLauncher would submit, built by dagster_k8s from our config."""
    job = render_k8s_job()
    pod = job.spec.template.spec
    container = pod.containers[0]
    sc = container.security_context
    assert sc.privileged is False
    assert sc.allow_privilege_escalation is False
    assert sc.run_as_non_root is True and sc.run_as_user == 10001
    assert sc.capabilities.drop == ["ALL"] and not sc.capabilities.add
    assert sc.proc_mount == "Unmasked" and pod.host_users is False
    assert sc.seccomp_profile.type == "Unconfined"
    assert container.resources.limits["cpu"] == container.resources.requests["cpu"]
    assert container.resources.limits["memory"] == container.resources.requests["memory"]
    assert {m.mount_path for m in container.volume_mounts} >= {
        "/srv/tmlbench/data",
        "/srv/tmlbench/runs",
        "/srv/tmlbench/warehouse",
    }
    assert {e.name for e in container.env} >= set(SANDBOX_ENV)
    assert job.spec.backoff_limit == 0


def test_k8s_job_has_the_folders_of_the_docker_run_containers() -> None:
    """The rendered Job's folders (mount paths and the variables naming them) and its image are
    those of the Docker run containers, which tests/orchestration/test_docker_deployment.py runs;
    only the sandbox backend (bwrap: no engine in a pod) differs."""
    from dagster_docker import DockerRunLauncher

    docker = launcher_config(instance_config(DOCKER), DockerRunLauncher)
    docker_env = dict(e.split("=", 1) for e in docker["env_vars"] if "=" in e)
    docker_binds = {
        v.split(":")[1] for v in docker["container_kwargs"]["volumes"] if v.startswith("/srv/")
    }
    container = render_k8s_job().spec.template.spec.containers[0]
    k8s_env = {e.name: e.value for e in container.env}
    for name in SANDBOX_ENV:
        assert k8s_env[name] == docker_env[name], name
    assert {m.mount_path for m in container.volume_mounts} == docker_binds
    assert docker_env["TMLBENCH_SANDBOX_BACKEND"] == "docker"
    assert k8s_env["TMLBENCH_SANDBOX_BACKEND"] == "bwrap"
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["image"]["repository"] == "tmlbench-user-code"  # what docker/build.sh tags


def test_helm_values_match_instance() -> None:
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    instance = instance_config(K8S)
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["concurrency"]["enabled"] is True
    assert values["concurrency"]["pools"]["defaultLimit"] == 1
    assert values["concurrency"]["pools"]["granularity"] == "op"
    assert (
        values["concurrency"]["runs"]["maxConcurrentRuns"]
        == instance["concurrency"]["runs"]["max_concurrent_runs"]
    )
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["--module-name", "orchestration.definitions"]
    k8s = values["runLauncher"]["config"]["k8sRunLauncher"]
    sc = k8s["runK8sConfig"]["containerConfig"]["securityContext"]
    assert sc["privileged"] is False and sc["procMount"] == "Unmasked"
    assert k8s["runK8sConfig"]["podSpecConfig"]["hostUsers"] is False
    assert k8s["resources"] == instance["run_launcher"]["config"]["resources"]


def test_compose_references_existing_files() -> None:
    compose = yaml.safe_load((DOCKER / "docker-compose.yaml").read_text())
    services = compose["services"]
    assert {
        "tmlbench_postgres",
        "tmlbench_user_code",
        "tmlbench_webserver",
        "tmlbench_daemon",
    } <= set(services)
    build = services["tmlbench_user_code"]["build"]
    context = (DOCKER / build["context"]).resolve()
    assert context == REPO_ROOT.resolve()
    assert (context / build["dockerfile"]).is_file()
    for name, service in services.items():
        assert not service.get("privileged"), name
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DOCKER / source).is_file(), f"{name}: {source}"
            elif not source.startswith("/"):
                assert source in compose["volumes"], f"{name}: volume {source}"
    # Names the DockerRunLauncher (docker-py, no compose prefix) refers to.
    launcher = instance_config(DOCKER)["run_launcher"]["config"]
    assert compose["networks"][launcher["network"]]["name"] == launcher["network"]
    for volume in launcher["container_kwargs"]["volumes"]:
        source, target = volume.split(":")[:2]
        if source.startswith("/"):  # host folders at the same path (the engine resolves binds)
            assert source == target, volume
        else:
            assert compose["volumes"][source]["name"] == source
    # The code location the workspace points at is the compose service.
    workspace = yaml.safe_load((DOCKER / "workspace.yaml").read_text())
    (location,) = workspace["load_from"]
    assert location["grpc_server"]["host"] in services
    assert "orchestration.definitions" in services["tmlbench_user_code"]["command"]


def test_compose_health_probes_start_no_python() -> None:
    """A probe runs every 2 s for as long as the stack runs, beside the attempts: `dagster api
    grpc-health-check` (an interpreter importing Dagster) cost 1.5 s of CPU each time."""
    compose = yaml.safe_load((DOCKER / "docker-compose.yaml").read_text())
    probes = {
        name: service["healthcheck"]["test"]
        for name, service in compose["services"].items()
        if "healthcheck" in service
    }
    assert set(probes) == {"tmlbench_postgres", "tmlbench_user_code"}, probes
    for name, probe in probes.items():
        assert probe[0] in ("CMD", "CMD-SHELL"), (name, probe)
        program = probe[1].split()[0]
        assert program in ("bash", "pg_isready"), (name, probe)


def test_dockerfile_references_existing_files() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    # The debootstrap base of runner/sandbox/image/build.sh: nothing from Docker Hub.
    assert re.search(r"^ARG BASE=tmlbench-base:bookworm$", text, re.M)
    assert re.search(r"^FROM \$\{BASE\}$", text, re.M)
    assert "uv sync --frozen" in text
    assert "bubblewrap" in text
    assert re.search(r"^USER (?!root|0)", text, re.M)
    for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.M):
        *sources, _dest = line.split()
        for source in sources:
            assert (REPO_ROOT / source).exists(), f"COPY {source}: no such file in the repo"
    # The CA is a build secret: mounted into RUN steps, never COPY'd into a layer.
    assert "--mount=type=secret,id=ca" in text
    assert not re.search(r"^(COPY|ADD)\b.*(\.crt|\.pem|ca-certificates)", text, re.M)


def test_no_registry_hosts_in_deployments() -> None:
    """Images are named without a registry host; package indexes come from the environment."""
    pattern = re.compile(r"\b[\w-]+(\.[\w-]+)*\.(io|org|com|dev|net)\b")
    for path in DEPLOYMENTS.rglob("*"):
        if path.is_file() and path.suffix in {"", ".yaml", ".yml"} and path.name != "README.md":
            for line in path.read_text().splitlines():
                assert not pattern.search(line), f"{path.name}: {line.strip()}"
