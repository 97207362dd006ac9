"""The checked cache (``harness.ground.checked_cache``): an entry is built once, trusted only while
its files match the checksums of its manifest, and any other entry is named in one line and
rebuilt under the same lock. Torch-free: the entries here are small text files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.ground.checked_cache import (
    FIELDS_SHA256,
    MANIFEST_FILE,
    Unusable,
    fields_sha256,
    get_or_build,
)


class Recorder:
    """A cache user: its builds, the lines it was told, and what it loads."""

    def __init__(self, folder: Path, text: str = "hello", key: str = "k1"):
        self.folder, self.text, self.key = folder, text, key
        self.builds = 0
        self.told: list[str] = []

    def work(self) -> str:
        self.builds += 1
        return self.text

    def save(self, folder: Path, text: str) -> tuple[dict, str]:
        (folder / "data.txt").write_text(text)
        (folder / "more.txt").write_text(text.upper())
        return {"length": len(text)}, text

    def load(self, folder: Path, manifest: dict) -> str:
        text = (folder / "data.txt").read_text()
        if len(text) != manifest["length"]:
            raise Unusable("data.txt is not as long as recorded")
        return text

    def get(self, **kwargs):
        return get_or_build(
            self.folder,
            key_fields={"key": self.key},
            work=self.work,
            save=self.save,
            load=self.load,
            on_unusable=self.told.append,
            **kwargs,
        )


def test_an_entry_is_built_once_then_loaded(tmp_path):
    user = Recorder(tmp_path / "entry")
    first = user.get()
    assert (first.value, first.cached, user.builds) == ("hello", False, 1)
    manifest = json.loads((tmp_path / "entry" / MANIFEST_FILE).read_text())
    assert manifest == first.manifest and manifest["key"] == "k1" and manifest["length"] == 5
    assert set(manifest["sha256"]) == {"data.txt", "more.txt"}
    again = user.get()
    assert (again.value, again.cached, again.manifest, user.builds) == ("hello", True, first.manifest, 1)
    assert user.told == [] and (tmp_path / "entry.lock").is_file()


def changed_byte(folder: Path) -> None:
    (folder / "data.txt").write_text("hellO")


def missing_file(folder: Path) -> None:
    (folder / "more.txt").unlink()


def extra_file(folder: Path) -> None:
    (folder / "stray.bin").write_bytes(b"\0")


def garbled_manifest(folder: Path) -> None:
    (folder / MANIFEST_FILE).write_text('{"sha256": ')


def sealed(fields: dict) -> str:
    """``fields`` as a manifest whose own checksum matches them (as a builder would write it)."""
    return json.dumps({**fields, FIELDS_SHA256: fields_sha256(fields)})


def no_checksums(folder: Path) -> None:
    (folder / MANIFEST_FILE).write_text(sealed({"key": "k1", "length": 5}))


def no_manifest(folder: Path) -> None:
    (folder / MANIFEST_FILE).unlink()


DAMAGES = {
    changed_byte: "data.txt does not match its sha256 in manifest.json",
    missing_file: "more.txt listed in manifest.json but missing",
    extra_file: "stray.bin not listed in manifest.json",
    garbled_manifest: "manifest.json is unreadable (JSONDecodeError: ",
    no_checksums: "manifest.json does not list the files' sha256 checksums",
    no_manifest: "manifest.json is missing (the build did not finish)",
}


@pytest.mark.parametrize("damage", list(DAMAGES), ids=[d.__name__ for d in DAMAGES])
def test_a_damaged_entry_is_named_in_one_line_and_rebuilt(tmp_path, damage):
    user = Recorder(tmp_path / "entry")
    user.get()
    damage(tmp_path / "entry")
    rebuilt = user.get()
    assert len(user.told) == 1 and "\n" not in user.told[0] and user.told[0].startswith(DAMAGES[damage])
    assert (rebuilt.value, rebuilt.cached, user.builds) == ("hello", False, 2)
    assert sorted(p.name for p in (tmp_path / "entry").iterdir()) == ["data.txt", MANIFEST_FILE, "more.txt"]
    assert user.get().cached and len(user.told) == 1  # healthy again


def test_another_key_or_a_refusing_loader_is_rebuilt(tmp_path):
    Recorder(tmp_path / "entry", key="k1").get()
    other = Recorder(tmp_path / "entry", key="k2")
    assert not other.get().cached
    assert other.told == ["manifest.json records key 'k1', not 'k2'"]
    shorter = Recorder(tmp_path / "entry", key="k2")
    (tmp_path / "entry" / "data.txt").write_text("hi")  # the loader's own check runs on checked files only
    assert not shorter.get().cached and shorter.told == ["data.txt does not match its sha256 in manifest.json"]
    manifest = json.loads((tmp_path / "entry" / MANIFEST_FILE).read_text())
    manifest["length"] = 3  # as if the builder had recorded it so
    (tmp_path / "entry" / MANIFEST_FILE).write_text(sealed(manifest))
    assert not shorter.get().cached and shorter.told[-1] == "data.txt is not as long as recorded"


def test_a_failed_build_leaves_what_was_there(tmp_path):
    user = Recorder(tmp_path / "entry")
    user.get()
    changed_byte(tmp_path / "entry")

    def fails() -> str:
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        get_or_build(
            tmp_path / "entry",
            key_fields={"key": "k1"},
            work=fails,
            save=user.save,
            load=user.load,
            on_unusable=user.told.append,
        )
    assert (tmp_path / "entry" / "data.txt").read_text() == "hellO" and (tmp_path / "entry" / MANIFEST_FILE).is_file()


def test_a_folder_without_a_manifest_can_be_adopted(tmp_path):
    user = Recorder(tmp_path / "entry")
    user.get()
    no_manifest(tmp_path / "entry")

    def adopt(folder: Path) -> tuple[dict, str]:
        text = (folder / "data.txt").read_text()
        if text != "hello":
            raise Unusable("data.txt fails its other check")
        return {"length": len(text)}, text

    kept = user.get(adopt=adopt)
    assert (kept.value, kept.cached, user.builds, user.told) == ("hello", True, 1, [])
    assert set(json.loads((tmp_path / "entry" / MANIFEST_FILE).read_text())["sha256"]) == {"data.txt", "more.txt"}
    no_manifest(tmp_path / "entry")
    changed_byte(tmp_path / "entry")
    assert not user.get(adopt=adopt).cached and user.told == ["data.txt fails its other check"]


def test_an_empty_or_missing_folder_is_built_without_a_word(tmp_path):
    (tmp_path / "entry").mkdir()
    user = Recorder(tmp_path / "entry")
    assert not user.get().cached and user.told == []


# ------------------------------------------------------------------------------------- the manifest's own fields


def edit_manifest(folder: Path, change) -> None:
    """Rewrite ``folder``'s manifest after ``change(fields)``: valid JSON, every file still matching."""
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    change(manifest)
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def edited_builder_field(folder: Path) -> None:
    edit_manifest(folder, lambda m: m.update(made_by="someone else"))


def edited_key(folder: Path) -> None:
    edit_manifest(folder, lambda m: m.update(key="k2"))


def changed_file_and_its_checksum(folder: Path) -> None:
    """A file replaced and its sha256 in the manifest updated to match: only the manifest's own
    checksum can tell."""
    import hashlib

    (folder / "more.txt").write_text("HELLO, EDITED")
    digest = hashlib.sha256(b"HELLO, EDITED").hexdigest()
    edit_manifest(folder, lambda m: m["sha256"].update({"more.txt": digest}))


FIELD_EDITS = [edited_builder_field, edited_key, changed_file_and_its_checksum]


class Signed(Recorder):
    """A cache user whose builder records a field its loader never looks at."""

    def save(self, folder: Path, text: str) -> tuple[dict, str]:
        fields, value = super().save(folder, text)
        return {**fields, "made_by": "recorder"}, value


@pytest.mark.parametrize("edit", FIELD_EDITS, ids=[e.__name__ for e in FIELD_EDITS])
def test_an_edited_manifest_field_is_named_in_one_line_and_rebuilt(tmp_path, edit):
    key = "k2" if edit is edited_key else "k1"  # the edited key claims to be what is asked for
    Signed(tmp_path / "entry").get()
    edit(tmp_path / "entry")
    user = Signed(tmp_path / "entry", key=key)
    rebuilt = user.get()
    assert user.told == [
        f"{MANIFEST_FILE} was edited after it was written (its fields do not match its manifest_sha256)"
    ]
    assert (rebuilt.cached, user.builds, rebuilt.manifest["made_by"], rebuilt.manifest["key"]) == (
        False,
        1,
        "recorder",
        key,
    )
    assert (tmp_path / "entry" / "more.txt").read_text() == "HELLO"
    assert user.get().cached and len(user.told) == 1  # healthy again


def test_the_manifest_carries_a_checksum_of_its_own_fields(tmp_path):
    from harness.ground.checked_cache import read_manifest

    entry = Signed(tmp_path / "entry").get()
    manifest = read_manifest(tmp_path / "entry")
    assert manifest == entry.manifest and manifest[FIELDS_SHA256] == fields_sha256(manifest)
    unsigned = {k: v for k, v in manifest.items() if k != FIELDS_SHA256}
    assert fields_sha256(unsigned) == manifest[FIELDS_SHA256]  # the field itself is not covered
    # canonical: the order of keys and the JSON's layout do not count, a value does
    assert fields_sha256(dict(reversed(list(unsigned.items())))) == manifest[FIELDS_SHA256]
    assert fields_sha256({**unsigned, "length": 6}) != manifest[FIELDS_SHA256]
    edited_builder_field(tmp_path / "entry")
    with pytest.raises(Unusable, match="was edited after it was written"):
        read_manifest(tmp_path / "entry")


def test_an_entry_from_before_the_fields_checksum_is_rebuilt_with_one_line(tmp_path):
    """Its fields cannot be told apart from edited ones, and a build is seeded (the same entry
    again), so it is rebuilt once rather than trusted."""
    from harness.ground.checked_cache import FIELDS_SHA256

    Signed(tmp_path / "entry").get()
    edit_manifest(tmp_path / "entry", lambda m: m.pop(FIELDS_SHA256))
    user = Signed(tmp_path / "entry")
    assert not user.get().cached and user.builds == 1
    assert user.told == [f"{MANIFEST_FILE} carries no checksum of its own fields (written by an older harness)"]
    assert user.get().cached and len(user.told) == 1
