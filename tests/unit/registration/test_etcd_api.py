"""etcd's JSON gateway, sans-IO: request bodies and answers (as etcd 3.4 writes them)."""

from __future__ import annotations

import base64

import pytest

from neutrino.registration import etcd_api as api

HEADER = '"header":{"cluster_id":"1","member_id":"2","revision":"3","raft_term":"2"}'


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_request_bodies() -> None:
    assert api.grant(10) == api.Request("/v3/lease/grant", {"TTL": 10})
    put = api.put("/neutrino/instances/a", '{"x":1}', 2324035625055994631)
    assert put.path == "/v3/kv/put"
    assert put.body == {
        "key": b64("/neutrino/instances/a"),
        "value": b64('{"x":1}'),
        "lease": "2324035625055994631",  # 64-bit ids travel as strings
    }
    assert api.keepalive(5).body == {"ID": "5"}
    assert api.revoke(5) == api.Request("/v3/lease/revoke", {"ID": "5"})
    assert api.delete("/k") == api.Request("/v3/kv/deleterange", {"key": b64("/k")})
    assert api.range_prefix("/neutrino/instances/").body == {
        "key": b64("/neutrino/instances/"),
        "range_end": b64("/neutrino/instances0"),  # "/" + 1
    }
    end = base64.b64decode(api.range_prefix("/é").body["range_end"])
    assert end == "/é".encode()[:-1] + bytes([0xA9 + 1])  # the last UTF-8 byte, plus one


def test_grant_and_keepalive_answers() -> None:
    grant = api.check(200, "{" + HEADER + ',"ID":"2324035625055994629","TTL":"5"}')
    assert api.lease_id(grant) == 2324035625055994629
    alive = api.check(200, '{"result":{' + HEADER + ',"ID":"7","TTL":"5"}}\n')
    assert api.keepalive_ttl(alive) == 5
    expired = api.check(200, '{"result":{' + HEADER + ',"ID":"7"}}\n')  # no TTL: gone
    assert api.keepalive_ttl(expired) == 0
    with pytest.raises(api.EtcdError):
        api.lease_id({"header": {}})


def test_error_answers() -> None:
    message = "etcdserver: requested lease not found"
    gone = f'{{"error":"{message}","message":"{message}","code":5}}'
    with pytest.raises(api.LeaseNotFound) as info:
        api.check(404, gone)
    assert info.value.code == 5
    stream = '{"error":{"grpc_code":5,"http_code":404,"message":"requested lease not found"}}'
    with pytest.raises(api.LeaseNotFound):
        api.check(200, stream)
    with pytest.raises(api.EtcdError, match="Not Found"):
        api.check(404, "Not Found")
    with pytest.raises(api.EtcdError) as other:
        api.check(400, '{"error":"bad","message":"etcdserver: key is not provided","code":3}')
    assert not isinstance(other.value, api.LeaseNotFound) and other.value.code == 3


def test_range_values() -> None:
    answer = api.check(
        200,
        "{"
        + HEADER
        + f',"kvs":[{{"key":"{b64("/a/b")}","value":"{b64("hi")}","lease":"1"}}],"count":"1"}}',
    )
    assert api.range_values(answer) == {"/a/b": "hi"}
    assert api.range_values(api.check(200, "{" + HEADER + "}")) == {}
