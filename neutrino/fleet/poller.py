"""The control plane's polls: every ``[fleet] poll_s``, each node agent's health and
models (its discovery when it comes up), the agents found in etcd when ``[fleet] etcd``
is set, then the plane's reconcile. A node that fails ``down_after`` polls in a row is
marked down; it is up again at its next answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time

from neutrino.fleet.agents import AgentClient, AgentDown, AgentRefused
from neutrino.fleet.plane import FleetPlane
from neutrino.registration import etcd_api
from neutrino.registration.etcd import EtcdClient, EtcdUnavailable
from neutrino.registration.record import InstanceRecord

log = logging.getLogger("neutrino.fleet")


class NodePoller:
    def __init__(self, plane: FleetPlane) -> None:
        self.plane = plane
        self.fleet = plane.fleet
        self._configured = {n.name for n in plane.cfg.nodes}
        self._etcd = (
            EtcdClient(self.fleet.etcd, timeout_s=self.fleet.call_timeout_s)
            if self.fleet.etcd
            else None
        )
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0

    async def start(self) -> None:
        """One round now (the fleet is known before the first request), then in the
        background."""
        await self.round()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="fleet-poll")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._etcd is not None:
            await self._etcd.close()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.fleet.poll_s)
            try:
                await self.round()
            except Exception:  # a bug: said, and the polls go on
                log.exception("fleet poll failed")

    async def round(self) -> None:
        found: dict[str, str] | None = None
        if self._etcd is not None:
            found = await self._from_etcd()
        if self.fleet.dns:
            found = {**(found or {}), **await self._from_dns()}
        if found is not None:
            await self._adopt_found(found)
        names = list(self.plane.topology.nodes)
        await asyncio.gather(*(self._poll(name) for name in names))
        self.rounds += 1
        self.plane.reconcile(time.monotonic())

    async def _poll(self, name: str) -> None:
        plane = self.plane
        node = plane.topology.nodes.get(name)
        client = plane.clients.get(name)
        if node is None or client is None:
            return
        was_up = node.up
        try:
            discovery = await client.discovery() if not node.up or not node.discovery else None
            health = await client.health()
            models = await client.models()
        except (AgentDown, AgentRefused) as exc:
            if plane.topology.failed(name, time.monotonic(), str(exc), self.fleet.down_after):
                await plane.node_down(name, str(exc))
                plane.router.refresh()
            elif not was_up and node.failures == 1:
                log.warning("node %s does not answer: %s", name, exc)
            return
        if plane.topology.answered(name, time.monotonic(), health, models, discovery):
            d = node.discovery
            log.info(
                "node %s is up (%s, %s cores, %d GPUs, budget %s MB free)", name,
                d.get("hostname"), d.get("cpu_cores"), len(d.get("devices", ())),
                node.budget_free_mb(),
            )  # fmt: skip
            plane.router.refresh()
        await plane.sync_node(name)

    async def _from_etcd(self) -> dict[str, str] | None:
        """The agents' records in etcd: name -> endpoint (None: etcd did not answer)."""
        assert self._etcd is not None
        try:
            answer = await self._etcd.call(etcd_api.range_prefix(self.fleet.prefix))
        except (EtcdUnavailable, etcd_api.EtcdError) as exc:
            log.warning("fleet: etcd unavailable, the known nodes stay: %s", exc)
            return None
        found: dict[str, str] = {}
        for key, value in etcd_api.range_values(answer).items():
            try:
                record = InstanceRecord.from_dict(json.loads(value))
            except (ValueError, KeyError, TypeError):
                log.warning("fleet: %s in etcd is not a node's record", key)
                continue
            where = next((x.address for x in record.listeners if x.protocol == "node"), "")
            if where:
                found[record.instance_id] = f"http://{where}"
        return found

    async def _from_dns(self) -> dict[str, str]:
        """Every address of the ``[fleet] dns`` names, each an agent, named as it says
        (its discovery's ``node``; one that does not answer is left for the next round)."""
        loop = asyncio.get_running_loop()
        endpoints: set[str] = set()
        for name in self.fleet.dns:
            host, _, port = name.rpartition(":")
            try:
                infos = await loop.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
            except OSError as exc:
                log.warning("fleet: %s does not resolve: %s", name, exc)
                continue
            for family, *_, address in infos:
                ip = str(address[0])
                endpoints.add(f"http://[{ip}]:{port}" if family == socket.AF_INET6 else
                              f"http://{ip}:{port}")  # fmt: skip
        known = {n.endpoint: n.name for n in self.plane.topology.nodes.values()}
        found: dict[str, str] = {}
        for endpoint in sorted(endpoints):
            name = known.get(endpoint) or await self._name_of(endpoint)
            if name:
                found[name] = endpoint
        return found

    async def _name_of(self, endpoint: str) -> str:
        client = AgentClient("?", endpoint, self.fleet.token, self.fleet.call_timeout_s)
        try:
            return str((await client.discovery()).get("node", ""))
        except (AgentDown, AgentRefused) as exc:
            log.debug("fleet: %s does not answer yet: %s", endpoint, exc)
            return ""
        finally:
            await client.close()

    async def _adopt_found(self, found: dict[str, str]) -> None:
        """Nodes found: new ones added, vanished ones removed ([[nodes]] stay)."""
        plane = self.plane
        for name, endpoint in found.items():
            if name not in self._configured:
                if name not in plane.topology.nodes:
                    log.info("fleet: node %s found at %s", name, endpoint)
                plane.add_node(name, endpoint, self.fleet.token)
        for name in list(plane.topology.nodes):
            if name not in found and name not in self._configured:
                log.info("fleet: node %s is no longer found", name)
                await plane.remove_node(name)
