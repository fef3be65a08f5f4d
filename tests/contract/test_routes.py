"""Catalogue and status routes (PROTOCOL.md 1, 1.6, 1.7), each also under /api/."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.contract import api, graphs
from tests.contract.servers import Server

FLAG_PAUSE_S = 0.5

GET_ROUTES = [
    "/prompt",
    "/queue",
    "/history",
    "/object_info",
    "/object_info/KSampler",
    "/system_stats",
    "/features",
    "/models",
    "/models/checkpoints",
    "/embeddings",
    "/extensions",
]


@pytest.mark.parametrize("path", GET_ROUTES)
async def test_get_route_answers_json_and_the_same_under_api(
    http: httpx.AsyncClient, path: str
) -> None:
    plain = await http.get(path)
    aliased = await http.get("/api" + path)
    assert plain.status_code == aliased.status_code == 200
    assert plain.headers["content-type"].startswith("application/json")
    if path == "/object_info":
        # Listing some nodes' inputs creates folders (input/3d), so a first call can differ.
        assert set(plain.json()) == set(aliased.json())
    elif path != "/system_stats":  # free RAM moves between the two calls
        assert plain.json() == aliased.json()


@pytest.mark.parametrize("path", ["/prompt", "/api/prompt"])
async def test_get_prompt_reports_queue_remaining(http: httpx.AsyncClient, path: str) -> None:
    body = (await http.get(path)).json()
    assert body == {"exec_info": {"queue_remaining": body["exec_info"]["queue_remaining"]}}
    assert isinstance(body["exec_info"]["queue_remaining"], int)


async def test_post_prompt_is_served_under_api_too(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    body = (
        await http.post(
            "/api/prompt", json={"prompt": graphs.txt2img(checkpoints[0], prefix, seed=1)}
        )
    ).json()
    entry = await api.wait_history(http, body["prompt_id"])
    assert entry["status"]["status_str"] == "success"


DEVICE_KEYS = {
    "name",
    "type",
    "index",
    "vram_total",
    "vram_free",
    "torch_vram_total",
    "torch_vram_free",
}


async def test_system_stats_has_system_and_one_device(
    server: Server, http: httpx.AsyncClient
) -> None:
    stats = (await http.get("/system_stats")).json()
    assert set(stats) == {"system", "devices"}
    system = stats["system"]
    assert {
        "os",
        "ram_total",
        "ram_free",
        "comfyui_version",
        "python_version",
        "pytorch_version",
        "embedded_python",
        "argv",
    } <= set(system)
    assert isinstance(system["ram_total"], int)
    assert isinstance(system["argv"], list)
    devices = stats["devices"]
    keys = DEVICE_KEYS
    if server.gateway:
        # By design a gateway lists the card of every worker, named with its worker and group.
        assert [device["worker"] for device in devices] == list(server.workers)
        keys = DEVICE_KEYS | {"worker", "group"}
    else:
        assert len(devices) == 1
    for device in devices:
        assert set(device) == keys
        assert device["vram_free"] <= device["vram_total"]


async def test_features_lists_preview_metadata_and_upload_limit(http: httpx.AsyncClient) -> None:
    assert (await http.get("/features")).json() == {
        "supports_preview_metadata": True,
        "max_upload_size": 104857600,
    }


async def test_models_lists_folder_names_including_checkpoints(http: httpx.AsyncClient) -> None:
    folders = (await http.get("/models")).json()
    assert isinstance(folders, list)
    assert {"checkpoints", "loras", "vae", "embeddings"} <= set(folders)


async def test_models_of_a_folder_lists_sorted_file_names(http: httpx.AsyncClient) -> None:
    names = (await http.get("/models/checkpoints")).json()
    assert names == sorted(names)
    assert all(isinstance(name, str) for name in names)


async def test_models_of_an_unknown_folder_is_404(http: httpx.AsyncClient) -> None:
    assert (await http.get("/models/no_such_folder")).status_code == 404


async def test_embeddings_and_extensions_are_lists_of_names(http: httpx.AsyncClient) -> None:
    for path in ("/embeddings", "/extensions"):
        listing = (await http.get(path)).json()
        assert isinstance(listing, list)
        assert all(isinstance(name, str) for name in listing)


async def test_object_info_describes_the_txt2img_nodes(http: httpx.AsyncClient) -> None:
    catalogue = (await http.get("/object_info")).json()
    used = {node["class_type"] for node in graphs.recorded_prompt().values()} | {"LoadImage"}
    assert used <= set(catalogue)
    save = catalogue["SaveImage"]
    assert {
        "input",
        "input_order",
        "output",
        "output_is_list",
        "output_name",
        "name",
        "display_name",
        "description",
        "python_module",
        "category",
        "output_node",
    } <= set(save)
    assert save["output_node"] is True
    assert save["name"] == "SaveImage"
    assert catalogue["KSampler"]["output_node"] is False


async def test_object_info_combo_lists_the_servers_checkpoints(
    http: httpx.AsyncClient, checkpoints: list[str]
) -> None:
    info = (await http.get("/object_info/CheckpointLoaderSimple")).json()
    assert list(info) == ["CheckpointLoaderSimple"]
    combo = info["CheckpointLoaderSimple"]["input"]["required"]["ckpt_name"]
    assert combo[0] == checkpoints


@pytest.mark.parametrize(
    ("class_type", "name", "folder"),
    [
        ("UNETLoader", "unet_name", "diffusion_models"),
        ("CLIPLoader", "clip_name", "text_encoders"),
        ("DualCLIPLoader", "clip_name1", "text_encoders"),
        ("LoraLoader", "lora_name", "loras"),
    ],
)
async def test_object_info_loader_combos_list_the_servers_model_folders(
    http: httpx.AsyncClient, class_type: str, name: str, folder: str
) -> None:
    info = (await http.get(f"/object_info/{class_type}")).json()
    combo = info[class_type]["input"]["required"][name]
    files = (await http.get(f"/models/{folder}")).json()
    assert combo[0] == files == sorted(files)


async def test_object_info_vae_loader_lists_the_vae_folder_then_pixel_space(
    http: httpx.AsyncClient,
) -> None:
    info = (await http.get("/object_info/VAELoader")).json()
    options = info["VAELoader"]["input"]["required"]["vae_name"][0]
    files = (await http.get("/models/vae")).json()
    assert options[: len(files)] == files
    assert options[-1] == "pixel_space"
    taesd = {"taesd", "taesdxl", "taesd3", "taef1"}
    assert set(options[len(files) : -1]) <= taesd


async def test_object_info_of_one_class_matches_the_full_catalogue(
    http: httpx.AsyncClient,
) -> None:
    one = (await http.get("/object_info/KSampler")).json()
    full = (await http.get("/object_info")).json()
    assert one == {"KSampler": full["KSampler"]}


async def test_object_info_of_an_unknown_class_is_empty_with_200(
    http: httpx.AsyncClient,
) -> None:
    response = await http.get("/object_info/NoSuchNode")
    assert response.status_code == 200
    assert response.json() == {}


@pytest.mark.parametrize(
    "body",
    [{"unload_models": True}, {"free_memory": True}, {}],
    ids=["unload_models", "free_memory", "nothing"],
)
async def test_free_answers_200_with_an_empty_body(
    http: httpx.AsyncClient, body: dict[str, bool]
) -> None:
    for path in ("/free", "/api/free"):
        response = await http.post(path, json=body)
        assert response.status_code == 200
        assert response.content == b""


async def test_a_prompt_after_free_memory_runs_every_node_again(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    prompt = graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed())
    await api.run(http, prompt)
    await http.post("/free", json={"free_memory": True})
    # The worker applies the flag when it wakes, at once when idle; a prompt queued before it
    # wakes would run first and keep the cache, so give it a moment.
    await asyncio.sleep(FLAG_PAUSE_S)
    entry = await api.run(http, prompt)
    cached = entry["status"]["messages"][1]
    assert cached[0] == "execution_cached"
    assert cached[1]["nodes"] == []


async def test_interrupt_while_idle_answers_200_and_does_not_touch_the_next_prompt(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    bodies: list[dict[str, str] | None] = [None, {}]
    for body in bodies:
        response = await http.post("/interrupt", json=body)
        assert response.status_code == 200
        assert response.content == b""
    entry = await api.run(http, graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed()))
    assert entry["status"]["status_str"] == "success"
