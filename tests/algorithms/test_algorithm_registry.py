import re
import sys
from importlib import import_module

import pytest

from harness.algorithms.registry import Implements, Registry
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


def _cited_module(tmp_path, monkeypatch, name: str, body: str) -> None:
    """A module ``name`` importable from ``tmp_path`` whose functions mark themselves on the
    registry ``toy_parts.PARTS`` (declared by the test)."""
    (tmp_path / f"{name}.py").write_text(f"from toy_parts import PARTS\n\n{body}")
    monkeypatch.syspath_prepend(tmp_path)


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """``toy_parts.PARTS``: parts that declare ``cites`` and state it again on their function."""
    (tmp_path / "toy_parts.py").write_text(
        "from harness.algorithms.registry import Registry\n"
        "PARTS = Registry('toy part', meta_keys=('reads', 'cites'), on_function=('cites',))\n"
        "PARTS.declare('spin', 'toy_spin:spin', reads=(), cites='Spin et al. 2024')\n"
    )
    monkeypatch.syspath_prepend(tmp_path)
    yield import_module("toy_parts").PARTS
    for module in ("toy_parts", "toy_spin"):
        sys.modules.pop(module, None)


def test_a_function_carries_its_declared_name_and_citation(parts, tmp_path, monkeypatch):
    _cited_module(
        tmp_path,
        monkeypatch,
        "toy_spin",
        "@PARTS.implements('spin', cites='Spin et al. 2024')\ndef spin():\n    pass\n",
    )
    assert parts.meta("spin")["cites"] == "Spin et al. 2024" and "toy_spin" not in sys.modules
    fn = parts.get("spin")
    assert fn is import_module("toy_spin").spin
    assert fn.implements == Implements("toy part", "spin", {"cites": "Spin et al. 2024"})


def test_a_function_citing_otherwise_than_its_declaration_fails_at_import(parts, tmp_path, monkeypatch):
    _cited_module(
        tmp_path, monkeypatch, "toy_spin", "@PARTS.implements('spin', cites='Spin 2023')\ndef spin():\n    pass\n"
    )
    message = "toy part 'spin': its function states cites='Spin 2023', its declaration cites='Spin et al. 2024'"
    with pytest.raises(ValueError, match=re.escape(message)):
        parts.get("spin")


def test_a_function_whose_name_is_not_declared_fails_at_import(parts, tmp_path, monkeypatch):
    _cited_module(
        tmp_path,
        monkeypatch,
        "toy_spin",
        "@PARTS.implements('spin', cites='Spin et al. 2024')\ndef spin():\n    pass\n\n\n"
        "@PARTS.implements('twirl', cites='Twirl 2025')\ndef twirl():\n    pass\n",
    )
    with pytest.raises(ValueError, match="toy part 'twirl' has a function but no declaration"):
        import_module("toy_spin")


def test_a_declared_part_without_its_marked_function_is_refused(parts, tmp_path, monkeypatch):
    _cited_module(tmp_path, monkeypatch, "toy_spin", "def spin():\n    pass\n")
    with pytest.raises(LookupError, match=r"toy part 'spin': toy_spin:spin does not carry @implements\('spin'"):
        parts.get("spin")


def test_a_marked_function_elsewhere_than_its_declaration_is_refused(parts, tmp_path, monkeypatch):
    _cited_module(
        tmp_path,
        monkeypatch,
        "toy_spin",
        "@PARTS.implements('spin', cites='Spin et al. 2024')\ndef spun():\n    pass\n",
    )
    with pytest.raises(ValueError, match="toy part 'spin' is declared at toy_spin:spin, not at toy_spin:spun"):
        import_module("toy_spin")


def test_a_part_states_exactly_its_on_function_keys_and_is_never_registered_directly(parts):
    with pytest.raises(TypeError, match=r"implements must state exactly \['cites'\]"):
        parts.implements("spin")
    with pytest.raises(TypeError, match="declare it, then mark its function with implements"):
        parts.register("twirl", reads=(), cites="Twirl 2025")
    with pytest.raises(ValueError, match="must be among meta_keys"):
        Registry("widget", meta_keys=("fast",), on_function=("cites",))
