"""The catalogue reads object_info, swaps in file lists, and merges workers' views."""

from __future__ import annotations

import pytest

from workers.comfy.catalog import Catalog
from workers.comfy.folders import content_type, vae_options, with_file_lists

RECORDED_CKPTS = ["A.safetensors", "B.safetensors", "C.safetensors", "rand_sd15.safetensors"]


def test_the_recorded_catalogue_has_its_472_classes(catalog: Catalog) -> None:
    assert len(catalog.classes) == 472
    assert "KSampler" in catalog
    assert "NoSuchNode" not in catalog
    assert ["KSampler"] not in catalog


@pytest.mark.parametrize(
    ("class_type", "expected"),
    [("SaveImage", True), ("PreviewAny", True), ("KSampler", False), ("NoSuchNode", False)],
)
def test_output_nodes_come_from_the_output_node_flag(
    catalog: Catalog, class_type: str, expected: bool
) -> None:
    assert catalog.is_output_node(class_type) is expected


def test_inputs_come_in_section_then_declared_order(catalog: Catalog) -> None:
    names = [(spec.section, spec.name) for spec in catalog.inputs("SaveImage")]
    assert names == [
        ("required", "images"),
        ("required", "filename_prefix"),
        ("hidden", "prompt"),
        ("hidden", "extra_pnginfo"),
    ]


def test_input_spec_describes_types_configs_and_combos(catalog: Catalog) -> None:
    steps = catalog.input_spec("KSampler", "steps")
    assert steps is not None
    assert (steps.section, steps.type, steps.options) == ("required", "INT", None)
    assert steps.config["min"] == 1
    assert steps.input_config[0] == "INT"
    ckpt = catalog.input_spec("CheckpointLoaderSimple", "ckpt_name")
    assert ckpt is not None
    assert ckpt.type == "COMBO"
    assert ckpt.options == tuple(RECORDED_CKPTS)
    hidden = catalog.input_spec("SaveImage", "prompt")
    assert hidden is not None
    assert (hidden.section, hidden.type) == ("hidden", "PROMPT")
    assert catalog.input_spec("KSampler", "nope") is None
    assert catalog.input_spec("NoSuchNode", "steps") is None


def test_v3_combos_list_their_options_in_the_config(catalog: Catalog) -> None:
    assert catalog.combo_options("LatentConcat", "dim") == ("x", "-x", "y", "-y", "t", "-t")
    assert catalog.combo_options("KSampler", "seed") is None


def test_an_entry_without_config_echoes_an_empty_one(catalog: Catalog) -> None:
    spec = catalog.input_spec("ControlNetLoader", "control_net_name")
    assert spec is not None
    assert spec.input_config == [[], {}]


def test_return_types_and_categories(catalog: Catalog) -> None:
    assert catalog.return_types("CheckpointLoaderSimple") == ("MODEL", "CLIP", "VAE")
    assert catalog.return_types("SaveImage") == ()
    assert catalog.return_types("NoSuchNode") == ()
    assert catalog.category("LoraLoader") == "loaders"


def test_with_combo_options_replaces_only_combos(catalog: Catalog) -> None:
    changed = catalog.with_combo_options(
        {
            ("CheckpointLoaderSimple", "ckpt_name"): ["mine.safetensors"],
            ("LatentConcat", "dim"): ["x"],
            ("KSampler", "steps"): ["ignored"],
            ("NoSuchNode", "x"): ["ignored"],
        }
    )
    assert changed.combo_options("CheckpointLoaderSimple", "ckpt_name") == ("mine.safetensors",)
    assert changed.combo_options("LatentConcat", "dim") == ("x",)
    assert changed.input_spec("KSampler", "steps") == catalog.input_spec("KSampler", "steps")
    assert catalog.combo_options("CheckpointLoaderSimple", "ckpt_name") == tuple(RECORDED_CKPTS)


def test_with_file_lists_fills_every_loader_of_a_folder(catalog: Catalog) -> None:
    local = with_file_lists(
        catalog,
        {
            "checkpoints": ["z.safetensors", "sd/x.ckpt"],
            "loras": ["style.safetensors"],
            "input": ["cat.png", "notes.txt", "clip.mp4", "b.jpg", "saved.latent"],
            "vae": ["ae.safetensors"],
            "vae_approx": ["taesd_decoder.pth", "taesd_encoder.pth", "taesdxl_decoder.pth"],
        },
    )
    for class_type in ("CheckpointLoaderSimple", "CheckpointLoader", "unCLIPCheckpointLoader"):
        assert local.combo_options(class_type, "ckpt_name") == ("sd/x.ckpt", "z.safetensors")
    assert local.combo_options("LoraLoaderModelOnly", "lora_name") == ("style.safetensors",)
    assert local.combo_options("LoadImage", "image") == ("b.jpg", "cat.png")
    assert local.combo_options("LoadImageMask", "image") == (
        "b.jpg",
        "cat.png",
        "clip.mp4",
        "notes.txt",
        "saved.latent",
    )
    assert local.combo_options("LoadVideo", "file") == ("clip.mp4",)
    assert local.combo_options("LoadLatent", "latent") == ("saved.latent",)
    assert local.combo_options("VAELoader", "vae_name") == (
        "ae.safetensors",
        "taesd",
        "pixel_space",
    )
    assert local.combo_options("ControlNetLoader", "control_net_name") == ()


@pytest.mark.parametrize(
    ("name", "kind"),
    [("a.png", "image"), ("a.webp", "image"), ("a.mp4", "video"), ("a.flac", "audio"), ("a", None)],
)
def test_content_types_are_guessed_from_names(name: str, kind: str | None) -> None:
    assert content_type(name) == kind


def test_vae_options_need_both_halves_of_a_taesd() -> None:
    assert vae_options([], ["taef1_encoder.pth"]) == ["pixel_space"]
    assert vae_options(["b", "a"], ["taef1_encoder.pth", "taef1_decoder.pth"]) == [
        "a",
        "b",
        "taef1",
        "pixel_space",
    ]


# --- merging ----------------------------------------------------------------------------


def _worker(catalog: Catalog, ckpts: list[str], drop: str | None = None) -> Catalog:
    local = catalog.with_combo_options({("CheckpointLoaderSimple", "ckpt_name"): ckpts})
    if drop is None:
        return local
    info = {name: entry for name, entry in local.object_info.items() if name != drop}
    return Catalog(object_info=info)


def test_merge_unions_combo_lists_in_first_seen_order(catalog: Catalog) -> None:
    merged = Catalog.merge(
        {
            "gpu0": _worker(catalog, ["a.safetensors", "b.safetensors"]),
            "gpu1": _worker(catalog, ["c.safetensors", "a.safetensors"], drop="LatentConcat"),
        }
    )
    assert merged.combo_options("CheckpointLoaderSimple", "ckpt_name") == (
        "a.safetensors",
        "b.safetensors",
        "c.safetensors",
    )
    assert merged.sources == {"gpu0", "gpu1"}
    assert merged.classes == catalog.classes


def test_merge_tells_which_sources_hold_a_value(catalog: Catalog) -> None:
    merged = Catalog.merge(
        {
            "gpu0": _worker(catalog, ["a.safetensors", "b.safetensors"]),
            "gpu1": _worker(catalog, ["c.safetensors", "a.safetensors"], drop="LatentConcat"),
        }
    )
    lookup = merged.sources_for_value
    assert lookup("CheckpointLoaderSimple", "ckpt_name", "a.safetensors") == {"gpu0", "gpu1"}
    assert lookup("CheckpointLoaderSimple", "ckpt_name", "b.safetensors") == {"gpu0"}
    assert lookup("CheckpointLoaderSimple", "ckpt_name", "zzz.safetensors") == frozenset()
    assert lookup("KSampler", "steps", 20) == {"gpu0", "gpu1"}
    assert lookup("NoSuchNode", "x", 1) == frozenset()
    assert merged.sources_for_class("LatentConcat") == {"gpu0"}
    assert merged.sources_for_class("KSampler") == {"gpu0", "gpu1"}


def test_merge_of_named_catalogues_and_of_merges(catalog: Catalog) -> None:
    first = Catalog.from_object_info(dict(_worker(catalog, ["a.ckpt"]).object_info), "w1")
    second = Catalog.from_object_info(dict(_worker(catalog, ["b.ckpt"]).object_info), "w2")
    third = Catalog.from_object_info(dict(_worker(catalog, ["c.ckpt"]).object_info), "w3")
    merged = Catalog.merge([Catalog.merge([first, second]), third])
    assert merged.sources == {"w1", "w2", "w3"}
    assert merged.sources_for_value("CheckpointLoaderSimple", "ckpt_name", "b.ckpt") == {"w2"}
    assert merged.combo_options("CheckpointLoaderSimple", "ckpt_name") == (
        "a.ckpt",
        "b.ckpt",
        "c.ckpt",
    )


def test_an_unnamed_single_catalogue_has_no_sources(catalog: Catalog) -> None:
    assert catalog.sources == frozenset()
    assert catalog.sources_for_class("KSampler") == frozenset()
