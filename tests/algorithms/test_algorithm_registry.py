import sys

import pytest

from harness.algorithms.registry import Registry
from harness.errors import ConfigError


def test_register_get_names_and_meta():
    reg = Registry("widget", meta_keys=("fast",))

    @reg.register("b", fast=True)
    def b():
        return "b"

    reg.register("a", fast=False)(lambda: "a")
    assert reg.get("b") is b and reg.get("a")() == "a"
    assert reg.names() == ["b", "a"]
    assert reg.meta("a") == {"fast": False}
    assert "a" in reg and "c" not in reg


def test_unknown_name_is_a_config_error_listing_valid_names():
    reg = Registry("widget")
    reg.register("beta")(len)
    reg.register("alpha")(len)
    with pytest.raises(ConfigError, match="unknown widget 'gamma'; valid: alpha, beta"):
        reg.get("gamma")
    with pytest.raises(ConfigError, match="unknown widget"):
        reg.meta("gamma")


def test_duplicates_and_missing_metadata_are_refused():
    reg = Registry("widget", meta_keys=("fast",))
    reg.register("a", fast=True)(len)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a", fast=True)
    with pytest.raises(TypeError, match=r"must declare exactly \['fast'\]"):
        reg.register("b")


def test_a_declared_entry_is_imported_on_first_get_only(tmp_path, monkeypatch):
    (tmp_path / "lazy_widgets.py").write_text("def spin():\n    return 'spun'\n")
    monkeypatch.syspath_prepend(tmp_path)
    reg = Registry("widget", meta_keys=("fast",))
    reg.declare("spin", "lazy_widgets:spin", fast=True)
    reg.check("spin")
    assert reg.names() == ["spin"] and reg.meta("spin") == {"fast": True}
    assert "lazy_widgets" not in sys.modules
    assert reg.get("spin")() == "spun" and "lazy_widgets" in sys.modules
    monkeypatch.delitem(sys.modules, "lazy_widgets")
    with pytest.raises(ValueError, match="not 'module:attr'"):
        reg.declare("twist", "lazy_widgets.twist", fast=False)
