"""
Tests for the Kubernetes manifests under C{docs/deploy/kubernetes/}: they
parse, every C{nfltr relay} container's arguments are accepted by the
relay's own option parser (C{nfltr relay}'s), and the Services and the
StatefulSet name ports and services the manifests declare.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.options import option_values, parse_values
from nfltr.cli.relay import commandParser
from nfltr.cli.relay_options import RELAY_OPTIONS, relay_config
from nfltr.store import RedisAddress

MANIFESTS = Path(__file__).parent.parent / "docs" / "deploy" / "kubernetes"
#: Values for the environment variables the manifests' arguments use, $(NAME).
SAMPLE_ENV = {"POD_NAME": "nfltr-0", "POD_NAMESPACE": "default"}


def documents() -> list[dict[str, Any]]:
    """
    Every object of every manifest.
    """
    found = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        with path.open() as f:
            found.extend(d for d in yaml.safe_load_all(f) if d is not None)
    return found


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """
    Each workload's pod labels and pod spec.
    """
    return [(o["spec"]["template"]["metadata"]["labels"], o["spec"]["template"]["spec"])
            for o in objects if o["kind"] in ("StatefulSet", "Deployment")]


def relay_containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for _, spec in pod_specs(objects) for c in spec["containers"]
            if c.get("command", [])[:2] == ["nfltr", "relay"]]


def expand(arg: str, env: dict[str, str]) -> str:
    """
    C{arg} with each C{$(NAME)} replaced as Kubernetes does, from C{env}.
    """
    return re.sub(r"\$\(([A-Z_]+)\)", lambda m: env[m.group(1)], arg)


class ManifestTests(SynchronousTestCase):
    """
    The Kubernetes manifests.
    """

    def test_parse(self) -> None:
        """
        Every manifest parses; there is a StatefulSet of relays, Redis, a
        headless Service and a LoadBalancer Service.
        """
        objects = documents()
        kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
        self.assertLessEqual({("StatefulSet", "nfltr"), ("StatefulSet", "nfltr-redis"),
                              ("Service", "nfltr"), ("Service", "nfltr-replicas")}, kinds)
        services = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Service"}
        self.assertEqual(services["nfltr-replicas"].get("clusterIP"), "None")
        self.assertEqual(services["nfltr"].get("type"), "LoadBalancer")

    def test_relayArguments(self) -> None:
        """
        Each relay container's arguments, with its environment variables
        expanded, are accepted by C{nfltr relay}'s parser and its checks;
        each is given the Redis directory of the manifests' Redis Service, a
        cluster CA and a replica link.
        """
        containers = relay_containers(documents())
        self.assertTrue(containers)
        for container in containers:
            names = {e["name"] for e in container.get("env", [])}
            env = {k: v for k, v in SAMPLE_ENV.items() if k in names}
            args = [expand(a, env) for a in container.get("args", [])]
            try:
                namespace = commandParser().parse_args(args)
            except SystemExit:
                self.fail(f"nfltr relay refuses the arguments {' '.join(args)}")
            values = parse_values(option_values(namespace, RELAY_OPTIONS), RELAY_OPTIONS)
            relay_config(values)
            directory = values["directory"]
            assert isinstance(directory, RedisAddress)
            self.assertEqual(directory.host, "nfltr-redis")
            self.assertIsNotNone(values["cluster-ca"])
            self.assertIsNotNone(values["replica-listen"])

    def test_portsAndServices(self) -> None:
        """
        Each Service's target ports are ports its pods' containers declare;
        the StatefulSet's service is the headless one, and the replica
        address the relays register is under it.
        """
        objects = documents()
        pods = pod_specs(objects)
        for service in (o for o in objects if o["kind"] == "Service"):
            selector = service["spec"]["selector"]
            declared = {p.get("name") for labels, spec in pods
                        if selector.items() <= labels.items()
                        for c in spec["containers"] for p in c.get("ports", [])}
            for port in service["spec"]["ports"]:
                self.assertIn(port["targetPort"], declared, service["metadata"]["name"])
        relays = next(o for o in objects if o["kind"] == "StatefulSet"
                      and o["metadata"]["name"] == "nfltr")
        self.assertEqual(relays["spec"]["serviceName"], "nfltr-replicas")
        for container in relay_containers(objects):
            address = next(a for a in container["args"] if a.startswith("--replica-address="))
            self.assertIn(".nfltr-replicas.", address)
