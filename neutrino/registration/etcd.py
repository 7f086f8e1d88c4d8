"""Discovery in etcd: the registration record under ``prefix + instance_id``, on a lease.

One background task: grant a lease of ``lease_ttl_s`` and put the record (the
InstanceRecord's JSON plus the last load) on it, retrying with jittered backoff while etcd
is down; then every ``lease_ttl_s / 3`` keep the lease alive and put the record again when
it changed. When a keep-alive fails the task registers again: a lease that is still alive
(etcd restarted with its data) keeps serving, one that is gone (expired, revoked, etcd lost
its data) is granted anew, and the record is put again either way. Each call tries the
endpoints in turn, starting from the last one that answered. ``deregister`` deletes the
key and revokes the lease. etcd's v3 JSON gateway over aiohttp; no etcd client library.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from typing import Any

import aiohttp

from neutrino.backoff import Backoff
from neutrino.config import DiscoveryConfig
from neutrino.registration import etcd_api as api
from neutrino.registration.loop import halt, keep_registered
from neutrino.registration.record import Source
from neutrino.registration.state import Registration

__all__ = ["EtcdClient", "EtcdRegistrar", "EtcdUnavailable"]

log = logging.getLogger("neutrino.registration")

BACKOFF_INITIAL_S = 0.2


class EtcdUnavailable(Exception):
    """No endpoint answered."""


class EtcdClient:
    """POSTs to etcd's JSON gateway, moving to the next endpoint when one does not answer
    (connection refused, timeout, HTTP 5xx); an answered error is raised as it is."""

    def __init__(self, endpoints: tuple[str, ...], timeout_s: float) -> None:
        if not endpoints:
            raise ValueError("no [discovery] etcd endpoints: build a registrar only with some")
        self._endpoints = [e.rstrip("/") for e in endpoints]
        self._current = 0
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def call(self, request: api.Request) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        errors: list[str] = []
        for _ in self._endpoints:
            url = self._endpoints[self._current] + request.path
            try:
                async with self._session.post(url, json=request.body) as response:
                    text = await response.text()
                    if response.status < 500:
                        return api.check(response.status, text)
                    errors.append(f"{url}: HTTP {response.status}")
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                errors.append(f"{url}: {type(e).__name__} {e}".rstrip())
            self._current = (self._current + 1) % len(self._endpoints)
        raise EtcdUnavailable("; ".join(errors))

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _error(e: Exception) -> str:
    kind = "etcd unavailable" if isinstance(e, EtcdUnavailable) else "etcd error"
    return f"{kind}: {e}"


class EtcdRegistrar:
    """Keeps this instance's record in etcd while it runs.

    ``start()`` from the running loop; ``await deregister(timeout_s)`` first on drain;
    ``await stop()`` at the end (a no-op after deregister). ``snapshot()`` for app_state.
    """

    def __init__(
        self, cfg: DiscoveryConfig, source: Source, *, rng: random.Random | None = None
    ) -> None:
        self._cfg = cfg
        self._source = source
        self._period = cfg.lease_ttl_s / 3
        backoff = Backoff(BACKOFF_INITIAL_S, max(BACKOFF_INITIAL_S, self._period), rng=rng)
        self._state = Registration(f"etcd at {', '.join(cfg.etcd)}", backoff)
        self._client = EtcdClient(cfg.etcd, timeout_s=max(1.0, self._period))
        self._task: asyncio.Task[None] | None = None
        self._lease: int | None = None
        self._key = ""
        self._value = ""  # the value last put

    def start(self) -> None:
        """Begin registering in the background; returns at once."""
        if self._task is None and not self._state.final:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="etcd")

    async def deregister(self, timeout_s: float) -> None:
        """Delete the key and revoke the lease, within ``timeout_s``; never raises."""
        if self._state.final:
            return
        try:
            await asyncio.wait_for(self._deregister(), timeout_s)
        except TimeoutError:
            log.warning("etcd: deregistering timed out after %.1f s", timeout_s)
        except (EtcdUnavailable, api.EtcdError) as e:
            log.warning("etcd: deregistering failed (%s)", e)
        except Exception:  # a bug: say where, once, and go on draining
            log.exception("etcd: deregistering failed")
        self._state.finish(deregistered=True)
        await self._client.close()

    async def stop(self) -> None:
        """Stop keeping the lease alive, without deleting anything (the key goes when the
        lease expires); a no-op after ``deregister``."""
        await self._halt()
        if not self._state.final:
            self._state.finish(deregistered=False)
        await self._client.close()

    def snapshot(self) -> dict[str, Any]:
        """For /neutrino/v1/app_state."""
        return {
            "endpoints": list(self._cfg.etcd),
            "key": self._key,
            "lease": self._lease,
            **self._state.snapshot(),
        }

    async def _deregister(self) -> None:
        await self._halt()
        if self._key and self._value:
            await self._client.call(api.delete(self._key))
            log.info("etcd: deleted %s", self._key)
        if self._lease is not None:
            with contextlib.suppress(api.LeaseNotFound):
                await self._client.call(api.revoke(self._lease))
            self._lease = None

    async def _halt(self) -> None:
        task, self._task = self._task, None
        await halt("etcd", task)

    async def _run(self) -> None:
        await keep_registered(
            "etcd",
            self._state,
            self._put_record,
            self._keep,
            (EtcdUnavailable, api.EtcdError),
            _error,
        )

    async def _put_record(self) -> None:
        """Put the record on the lease, granting one if there is none alive."""
        value = self._record_value()
        lease = self._lease
        if lease is not None:
            with contextlib.suppress(api.LeaseNotFound):
                if api.keepalive_ttl(await self._client.call(api.keepalive(lease))) > 0:
                    await self._put(value, lease)
                    return
            self._lease = None
        lease = api.lease_id(await self._client.call(api.grant(self._cfg.lease_ttl_s)))
        self._lease = lease
        await self._put(value, lease)

    async def _put(self, value: str, lease: int) -> None:
        await self._client.call(api.put(self._key, value, lease))
        self._value = value

    async def _keep(self) -> tuple[str, BaseException | None]:
        """Keep the lease alive until that fails; returns why (and the exception where
        the source failed)."""
        while (lease := self._lease) is not None:
            await asyncio.sleep(self._period)
            try:
                if api.keepalive_ttl(await self._client.call(api.keepalive(lease))) <= 0:
                    return "the lease expired", None
                self._state.reported()
                value = self._record_value()
                if value != self._value:
                    await self._put(value, lease)
            except api.LeaseNotFound:
                return "the lease is gone", None
            except (EtcdUnavailable, api.EtcdError) as e:
                return _error(e), None
            except Exception as e:  # the source failed (the app's bug): its traceback once
                return f"{type(e).__name__}: {e}", e
        return "no lease", None

    def _record_value(self) -> str:
        record = self._source.record()
        self._key = self._cfg.prefix + record.instance_id
        data = {**record.to_dict(), "load": self._source.load().to_dict()}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))
