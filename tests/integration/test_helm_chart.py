"""The Helm chart (deploy/helm/neutrino), offline: ``helm lint``, ``helm template`` of the
defaults and of the ci/ value sets (a GPU engine; etcd discovery of node agents with
autoscaling; KEDA), every rendered Kubernetes object checked against the Kubernetes
schemas (kubernetes-validate, strict), and what the objects say checked against Neutrino
itself: the rendered configuration loads, the probes name real routes on real ports, the
drain fits in the termination grace. ``make test`` installs helm (``make helm``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from neutrino.config import from_mapping

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "neutrino"
HELM = Path(sys.prefix) / "bin" / "helm"
HELM_BIN = str(HELM) if HELM.is_file() else shutil.which("helm")
KUBERNETES = ("1.29.0", "1.35.0")  # an old and a recent release
VALUE_SETS = {
    "defaults": [],
    "gpu-engine": ["-f", str(CHART / "ci" / "gpu-engine-values.yaml")],
    "fleet-etcd-autoscaling": ["-f", str(CHART / "ci" / "fleet-etcd-autoscaling-values.yaml")],
    "keda": ["-f", str(CHART / "ci" / "keda-values.yaml")],
}
CRDS = {"ScaledObject"}  # KEDA's: not a Kubernetes schema (checked field by field below)

pytestmark = pytest.mark.skipif(HELM_BIN is None, reason="helm is missing (make helm)")


def helm(*args: str) -> str:
    assert HELM_BIN is not None
    done = subprocess.run([HELM_BIN, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def render(name: str, *extra: str) -> list[dict[str, Any]]:
    out = helm("template", "rel", str(CHART), "--namespace", "llm", *VALUE_SETS[name], *extra)
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = by_kind(docs, kind)
    return doc


def rendered_config(docs: list[dict[str, Any]], tmp_path: Path) -> dict[str, Any]:
    """The ConfigMap's neutrino.toml, loaded as Neutrino loads it (the Secret's files,
    which only the pod has, replaced by files here)."""
    text = one(docs, "ConfigMap")["data"]["neutrino.toml"]
    secrets = tmp_path / "secrets"
    secrets.mkdir(exist_ok=True)
    (secrets / "node-token").write_text("t0ken\n")
    (secrets / "api-keys").write_text("")
    data = tomllib.loads(text.replace("/etc/neutrino/secrets", str(secrets)))
    from_mapping(data)  # raises ConfigError if Neutrino would refuse it
    return data


def test_helm_lint_passes_for_every_value_set() -> None:
    for name, args in VALUE_SETS.items():
        out = helm("lint", str(CHART), "--strict", *args)
        assert "0 chart(s) failed" in out, (name, out)


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_rendered_object_is_valid_for_kubernetes(name: str) -> None:
    docs = render(name)
    kinds = {d["kind"] for d in docs}
    assert {"ConfigMap", "Deployment", "Service"} <= kinds
    for doc in docs:
        if doc["kind"] in CRDS:
            continue
        for version in KUBERNETES:
            kubernetes_validate.validate(doc, version, strict=True)


def test_a_wrong_object_is_caught_by_the_check() -> None:
    deployment = one(render("defaults"), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"][
        "pathh"
    ] = "/x"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES[-1], strict=True)


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_the_rendered_configuration_is_one_neutrino_loads(name: str, tmp_path: Path) -> None:
    rendered_config(render(name), tmp_path)


def _container(docs: list[dict[str, Any]], name: str, kind: str = "Deployment") -> dict[str, Any]:
    pod = one(docs, kind)["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == name)


def test_probes_ports_and_the_drain_match_the_server(tmp_path: Path) -> None:
    docs = render("defaults")
    neutrino = _container(docs, "neutrino")
    ports = {p["name"]: p for p in neutrino["ports"]}
    assert ports["http3"]["protocol"] == "UDP"
    args = neutrino["args"]
    assert args[args.index("--http-address") + 1] == f"0.0.0.0:{ports['http']['containerPort']}"
    assert args[args.index("--metrics-address") + 1].endswith(
        f":{ports['metrics']['containerPort']}"
    )
    assert neutrino["readinessProbe"]["httpGet"] == {"path": "/neutrino/v1/status", "port": "http"}
    assert neutrino["livenessProbe"]["httpGet"]["path"] == "/neutrino/v1/live"
    pod = one(docs, "Deployment")["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(
        ports["metrics"]["containerPort"]
    )
    config = rendered_config(docs, tmp_path)
    grace = config["shutdown"]["grace_s"]
    pause = int(neutrino["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pod["spec"]["terminationGracePeriodSeconds"] >= grace + pause + 5
    service = one(docs, "Service")
    assert {(p["name"], p["protocol"]) for p in service["spec"]["ports"]} == {
        ("http", "TCP"), ("grpc", "TCP"), ("metrics", "TCP"), ("http3", "UDP"),
    }  # fmt: skip
    assert pod["spec"]["securityContext"]["runAsUser"] == 10001
    assert neutrino["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_gpu_engine_sits_beside_neutrino_on_the_shared_socket(tmp_path: Path) -> None:
    docs = render("gpu-engine")
    engine = _container(docs, "engine")
    assert engine["resources"]["limits"]["nvidia.com/gpu"] == 1
    command = engine["command"]
    assert command[:3] == ["python", "-m", "neutrino.engines.vllm"]
    socket = command[command.index("--socket") + 1]
    config = rendered_config(docs, tmp_path)
    assert config["engines"] == [{"name": "sidecar", "socket": socket}]
    mounts = {m["name"]: m["mountPath"] for m in engine["volumeMounts"]}
    neutrino_mounts = {
        m["name"]: m["mountPath"] for m in _container(docs, "neutrino")["volumeMounts"]
    }
    assert mounts["sockets"] == neutrino_mounts["sockets"] == str(Path(socket).parent)
    assert config["auth"]["api_keys_file"].endswith("/api-keys")
    secret = one(docs, "Secret")
    import hashlib

    assert secret["stringData"]["api-keys"].split() == [
        hashlib.sha256(k.encode()).hexdigest() for k in ("sk-test-one", "sk-test-two")
    ]


def test_the_fleet_runs_agents_found_through_etcd_and_autoscales(tmp_path: Path) -> None:
    docs = render("fleet-etcd-autoscaling")
    agent = _container(docs, "node-agent", "DaemonSet")
    args = agent["args"]
    assert args[args.index("--token-env") + 1] == "NEUTRINO_NODE_TOKEN"
    assert args[args.index("--etcd") + 1] == "http://etcd.infra.svc:2379"
    assert args[args.index("--memory-budget") + 1] == "64G"
    env = {e["name"]: e for e in agent["env"]}
    assert env["NEUTRINO_NODE_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "node-token"
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    config = rendered_config(docs, tmp_path)
    assert config["fleet"]["etcd"] == ["http://etcd.infra.svc:2379"]
    assert config["discovery"]["etcd"] == ["http://etcd.infra.svc:2379"]
    assert [c["id"] for c in config["catalogue"]] == [
        "qwen2.5-7b-instruct",
        "llama-3.1-8b-instruct",
    ]
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == one(docs, "Deployment")["metadata"]["name"]
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "neutrino_num_requests_waiting"
    assert "replicas" not in one(docs, "Deployment")["spec"]  # the HPA owns it
    assert by_kind(docs, "PodDisruptionBudget")


def test_the_default_fleet_is_found_by_its_headless_service(tmp_path: Path) -> None:
    docs = render("defaults", "--set", "nodeAgent.enabled=true")
    services = {s["metadata"]["name"]: s for s in by_kind(docs, "Service")}
    headless = services["rel-neutrino-node"]
    assert headless["spec"]["clusterIP"] == "None"
    config = rendered_config(docs, tmp_path)
    port = headless["spec"]["ports"][0]["port"]
    assert config["fleet"]["dns"] == [f"rel-neutrino-node.llm.svc.cluster.local:{port}"]
    agent = _container(docs, "node-agent", "DaemonSet")
    assert agent["readinessProbe"]["httpGet"]["path"] == "/livez"
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES[-1], strict=True)


def test_keda_scales_on_the_queue() -> None:
    docs = render("keda")
    scaled = one(docs, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    spec = scaled["spec"]
    assert spec["scaleTargetRef"]["name"] == one(docs, "Deployment")["metadata"]["name"]
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metadata"]["threshold"] == "6"
    assert "neutrino_num_requests_waiting" in trigger["metadata"]["query"]
    assert not by_kind(docs, "HorizontalPodAutoscaler")


def test_contradictions_are_refused_at_render_time() -> None:
    assert HELM_BIN is not None
    for args, message in [
        (["--set", "autoscaling.enabled=true", "--set", "keda.enabled=true"], "choose one"),
        (["--set", "engine.enabled=true"], "engine.model.name"),
        (
            ["--set", "nodeAgent.enabled=true", "--set", "nodeAgent.discovery=etcd"],
            "etcd.endpoints",
        ),
        (["--set", "engine.kind=sglang"], "/engine/kind"),
    ]:
        done = subprocess.run([HELM_BIN, "template", "rel", str(CHART), *args],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)


def _leaves(tree: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix


def test_every_value_is_documented_in_the_chart_readme() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    missing = [v for v in _leaves(values) if f"| `{v}` |" not in readme]
    assert not missing, f"values not in deploy/helm/neutrino/README.md: {missing}"
