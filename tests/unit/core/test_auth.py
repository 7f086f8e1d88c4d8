"""API keys: configuration, lookup by digest, model allow-lists, per-key limits, admin."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from neutrino.config import ConfigError, from_mapping
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.observability.counters import Counters
from neutrino.pipeline.auth import KeyRing, presented_key


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def ring(auth: dict[str, object], admin_address: str = "") -> tuple[KeyRing, Counters]:
    data: dict[str, object] = {"auth": auth}
    if admin_address:
        data["admin"] = {"address": admin_address}
    cfg = from_mapping(data)
    counters = Counters()
    return KeyRing(cfg.auth.keys, bool(cfg.admin.address), counters), counters


def refused(kind: ErrorKind, call: object, *args: object) -> NeutrinoError:
    with pytest.raises(NeutrinoError) as info:
        call(*args)  # type: ignore[operator]
    assert info.value.kind is kind, info.value
    return info.value


def test_no_keys_leaves_the_api_open_and_says_so() -> None:
    keys, _ = ring({})
    assert keys.authenticate("", "") is None
    keys.authorize_admin("", "", on_admin_listener=False)
    assert "no API keys configured" in keys.describe()


def test_bearer_and_x_api_key_and_nothing_else(tmp_path: Path) -> None:
    keys, counters = ring({"api_keys": ["sk-one"]})
    assert keys.authenticate("Bearer sk-one", "") is not None
    assert keys.authenticate("bearer  sk-one ", "") is not None
    assert keys.authenticate("", "sk-one") is not None
    assert presented_key("Basic c2stb25l", "") == ""
    err = refused(ErrorKind.UNAUTHENTICATED, keys.authenticate, "", "")
    assert "Authorization: Bearer" in err.message
    err = refused(ErrorKind.UNAUTHENTICATED, keys.authenticate, "Bearer sk-two", "")
    assert "sk-two" not in err.message and err.code == "invalid_api_key"
    refused(ErrorKind.UNAUTHENTICATED, keys.authenticate, "Bearer sk-on", "")
    assert counters.auth_refused == 3


def test_models_and_concurrency_per_key(tmp_path: Path) -> None:
    keys, counters = ring(
        {"keys": [{"key": "sk-a", "name": "team-a", "models": ["m1"], "max_concurrency": 2}]}
    )
    a = keys.authenticate("Bearer sk-a", "")
    assert a is not None and a.name == "team-a"
    err = refused(ErrorKind.PERMISSION_DENIED, keys.admit, a, "m2")
    assert err.code == "model_not_allowed" and err.param == "model"
    keys.admit(a, "m1")
    keys.admit(a, "m1")
    err = refused(ErrorKind.KEY_CONCURRENCY, keys.admit, a, "m1")
    assert err.http_status == 429 and err.retry_after_s == 1
    a.release()
    keys.admit(a, "m1")
    assert a.inflight == 2 and counters.auth_refused == 2


def test_keys_file_of_digests(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(
        f"# team keys\n{sha('sk-f1')} name=ops models=m1,m2 max_concurrency=3\n\n"
        f"{sha('sk-f2')}   # plain\n{sha('sk-adm')} admin\n"
    )
    keys, _ = ring({"api_keys_file": str(path)})
    f1 = keys.authenticate("Bearer sk-f1", "")
    assert f1 is not None and f1.name == "ops" and f1.key.max_concurrency == 3
    assert f1.allows("m2") and not f1.allows("m3")
    f2 = keys.authenticate("", "sk-f2")
    assert f2 is not None and f2.allows("anything") and f2.name == "keys:4"
    keys.authorize_admin("Bearer sk-adm", "", on_admin_listener=False)
    refused(ErrorKind.PERMISSION_DENIED, keys.authorize_admin, "Bearer sk-f1", "", False)
    refused(ErrorKind.UNAUTHENTICATED, keys.authorize_admin, "", "", False)


@pytest.mark.parametrize(
    ("auth", "words"),
    [
        ({"api_keys": "sk"}, "[auth].api_keys must be a list"),
        ({"api_keys": [""]}, "[auth].api_keys[0] must be a non-empty string"),
        ({"keys": [{"name": "x"}]}, "needs exactly one of key or sha256"),
        ({"keys": [{"sha256": "abc"}]}, "64 hex digits"),
        ({"keys": [{"key": "k", "max_concurrency": -1}]}, "must be an integer >= 0"),
        ({"keys": [{"key": "k", "models": []}]}, "non-empty list of model names"),
        ({"keys": [{"key": "k", "colour": "red"}]}, "unknown key [[auth.keys]][0].colour"),
        ({"token": "x"}, "unknown key [auth].token"),
        ({"api_keys_file": "/nonexistent/keys"}, "cannot read /nonexistent/keys"),
    ],
)
def test_bad_auth_config_is_one_clear_error(auth: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError) as info:
        from_mapping({"auth": auth})
    assert words in str(info.value)


def test_a_bad_keys_file_line_names_its_place(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"{sha('a')}\n{sha('b')} colour=red\n")
    with pytest.raises(ConfigError) as info:
        from_mapping({"auth": {"api_keys_file": str(path)}})
    assert f"{path}:2: field 2 is not one of name=" in str(info.value)


def test_admin_routes_without_admin_keys() -> None:
    api_only, _ = ring({"api_keys": ["sk"]})
    err = refused(ErrorKind.PERMISSION_DENIED, api_only.authorize_admin, "Bearer sk", "", False)
    assert "[admin] address" in err.message
    listener, _ = ring({"api_keys": ["sk"]}, admin_address="127.0.0.1:0")
    refused(ErrorKind.NOT_FOUND, listener.authorize_admin, "Bearer sk", "", False)
    listener.authorize_admin("", "", on_admin_listener=True)  # its address guards it
    admin_only, _ = ring({"admin_keys": ["sk-adm"]})
    assert admin_only.authenticate("", "") is None  # admin keys alone leave the API open
    refused(ErrorKind.UNAUTHENTICATED, admin_only.authorize_admin, "", "", False)
    admin_only.authorize_admin("", "sk-adm", False)


def test_a_key_configured_twice_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        from_mapping({"auth": {"api_keys": ["sk"], "keys": [{"key": "sk", "models": ["m"]}]}})
    message = str(info.value)
    assert "the same key is configured twice (api_keys[0] and auth.keys[0])" in message
    assert "'sk'" not in message and '"sk"' not in message


def test_more_choices_than_a_key_may_have_is_a_400_not_a_retry() -> None:
    keys, _ = ring({"keys": [{"key": "sk-a", "max_concurrency": 2}]})
    a = keys.authenticate("Bearer sk-a", "")
    err = refused(ErrorKind.BAD_REQUEST, keys.admit, a, "m", 3)
    assert err.param == "n" and err.retry_after_s is None
    keys.admit(a, "m", 2)


def test_a_keys_file_never_echoes_a_field() -> None:
    path_text = f"{sha('a')} sk-pasted-secret\n"
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as fh:
        fh.write(path_text)
    with pytest.raises(ConfigError) as info:
        from_mapping({"auth": {"api_keys_file": fh.name}})
    assert "sk-pasted-secret" not in str(info.value) and "field 2" in str(info.value)
