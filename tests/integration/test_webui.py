"""What the web frontend needs of the gateway: its files at `/`, the jobs API, user data kept
once for the farm, clears scoped to the caller, and file lists that follow the workers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from gateway.api.browsers import COOKIE
from tests.contract import images
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import (
    CHECKPOINTS,
    as_external,
    gateway_settings,
    running_gateway,
    started_emulators,
    txt2img,
)
from workers.supervision.launch import FarmLayout, WorkerHandle

INDEX = b"<!doctype html><title>editor</title>"


def load_image(name: str, prefix: str) -> dict[str, Any]:
    return {
        "1": {"class_type": "LoadImage", "inputs": {"image": name}},
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": prefix}},
    }


def web_root(tmp_path: Path) -> Path:
    root = tmp_path / "web"
    (root / "extensions" / "core").mkdir(parents=True)
    (root / "index.html").write_bytes(INDEX)
    (root / "extensions" / "core" / "widgets.js").write_text("export {}")
    (root / "app.js").write_text("console.log('app')")
    return root


async def upload(http: httpx.AsyncClient, name: str) -> httpx.Response:
    files = {"image": (name, images.png((200, 10, 10)), "image/png")}
    return await http.post("/upload/image", files=files)


async def until(check: Any, what: str, timeout_s: float = 10) -> None:
    deadline_s = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        if asyncio.get_running_loop().time() > deadline_s:
            pytest.fail(f"{what} within {timeout_s}s")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def gateway(
    redis_url: str, tmp_path: Path, handles: list[WorkerHandle], input_dir: Path | None, **over: Any
) -> AsyncIterator[httpx.AsyncClient]:
    settings = gateway_settings(redis_url, tmp_path, **over)
    async with (
        running_gateway(settings, as_external(handles), input_dir) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):

        async def ready() -> bool:
            return (await http.get("/readyz")).status_code == 200

        await until(ready, "no worker ready", timeout_s=20)
        yield http


# -- the frontend's files --------------------------------------------------------------------


async def test_the_page_its_files_and_extensions_come_from_the_web_root(
    redis_url: str, tmp_path: Path, emulators: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    root = web_root(tmp_path)
    async with gateway(
        redis_url, tmp_path, emulators, farm_layout.input_dir, front_end_root=root
    ) as http:
        page = await http.get("/")
        assert (page.status_code, page.content) == (200, INDEX)
        assert page.headers["cache-control"] == "no-store, must-revalidate"
        assert len(page.cookies[COOKIE]) >= 16  # the browser's id, for its own clears
        script = await http.get("/app.js")
        assert (script.status_code, script.text) == (200, "console.log('app')")
        assert "/extensions/core/widgets.js" in (await http.get("/api/extensions")).json()
        # Not a file of the web root: the worker's static root answers, as before.
        missing = await http.get("/no/such/file.js")
        assert missing.status_code == 404
        escaping = await http.get("/..%2f..%2fetc/passwd")
        assert escaping.status_code == 404


async def test_without_a_frontend_the_page_says_how_to_get_one(
    redis_url: str, tmp_path: Path, emulators: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    async with gateway(
        redis_url, tmp_path, emulators, farm_layout.input_dir, front_end_root=empty
    ) as http:
        page = await http.get("/")
        assert page.status_code == 404
        assert page.headers["content-type"].startswith("text/html")
        assert "comfyui-frontend-package" in page.text
        assert "--front-end-root" in page.text


async def test_without_template_packages_the_workers_templates_are_served(
    redis_url: str, tmp_path: Path, emulators: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    async with gateway(redis_url, tmp_path, emulators, farm_layout.input_dir) as http:
        # An emulated worker offers its built-in templates, as a ComfyUI with its package.
        for index in ("/templates/index.json", "/templates/index.pt-BR.json"):
            answer = await http.get(index)
            assert answer.status_code == 200
            assert answer.headers["content-type"] == "application/json"
            names = [t["name"] for c in answer.json() for t in c["templates"]]
            assert names[0] == "image_z_image_turbo", names
        workflow = await http.get("/templates/image_z_image_turbo.json")
        assert {node["type"] for node in workflow.json()["nodes"]} >= {"UNETLoader", "SaveImage"}
        thumbnail = await http.get("/templates/image_z_image_turbo-1.webp")
        assert (thumbnail.status_code, thumbnail.headers["content-type"]) == (200, "image/webp")
        assert (await http.get("/templates/no_such_template.json")).status_code == 404
        # An index a worker lacks (a ComfyUI without the package lacks all) reads as empty.
        unknown = await http.get("/templates/index.xx.json")
        assert (unknown.status_code, unknown.json()) == (200, [])


async def test_installed_template_packages_are_served_as_comfyui_serves_them(
    redis_url: str,
    tmp_path: Path,
    emulators: list[WorkerHandle],
    farm_layout: FarmLayout,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    packages = tmp_path / "site"
    for bundle, name, body in (
        ("comfyui_workflow_templates_json", "index.json", '[{"moduleName": "default"}]'),
        ("comfyui_workflow_templates_media_image", "default-1.webp", "webp"),
    ):
        (packages / bundle / "templates").mkdir(parents=True)
        (packages / bundle / "__init__.py").write_text("")
        (packages / bundle / "templates" / name).write_text(body)
    (packages / "secret.txt").write_text("no")
    monkeypatch.syspath_prepend(str(packages))
    async with gateway(redis_url, tmp_path, emulators, farm_layout.input_dir) as http:
        index = await http.get("/templates/index.json")
        assert (index.status_code, index.json()) == (200, [{"moduleName": "default"}])
        thumbnail = await http.get("/templates/default-1.webp")
        assert (thumbnail.status_code, thumbnail.text) == (200, "webp")
        assert (await http.get("/templates/index.fr.json")).status_code == 404
        assert (await http.get("/templates/..%2f..%2fsecret.txt")).status_code == 404


# -- /api/jobs ---------------------------------------------------------------------------------


async def test_jobs_lists_running_pending_and_finished_prompts_in_comfyui_shape(
    redis_url: str, tmp_path: Path, farm_layout: FarmLayout
) -> None:
    with started_emulators(farm_layout, ["jobs0"]) as handles:
        async with gateway(redis_url, tmp_path, handles, farm_layout.input_dir) as http:
            client = ComfyStyleClient(str(http.base_url))
            await client.open()
            done = await client.queue_prompt(txt2img(CHECKPOINTS[0], "jobs_done"))
            entry = await client.wait(done)
            slow = txt2img(CHECKPOINTS[0], "jobs_slow", steps=5000, size=1024)
            running = await client.queue_prompt(slow)
            waiting = [await client.queue_prompt(slow) for _ in range(2)]
            await client.job_in(running, ("running",))

            listed = (await http.get("/api/jobs")).json()
            by_id = {job["id"]: job for job in listed["jobs"]}
            assert listed["pagination"] == {
                "offset": 0, "limit": None, "total": 4, "has_more": False,
            }  # fmt: skip
            assert by_id[running]["status"] == "in_progress"
            assert {by_id[i]["status"] for i in waiting} == {"pending"}
            finished = by_id[done]
            assert finished["status"] == "completed"
            assert finished["outputs_count"] == 1 == finished["previewable_outputs_count"]
            preview = finished["preview_output"]
            assert preview["filename"] == entry["outputs"]["9"]["images"][0]["filename"]
            assert (preview["nodeId"], preview["mediaType"], preview["subfolder"]) == (
                "9", "images", "jobs0",
            )  # fmt: skip
            assert finished["execution_end_time"] >= finished["execution_start_time"] > 0
            assert [job["id"] for job in listed["jobs"]][-1] == done  # newest first

            page = (await http.get("/api/jobs", params={"limit": 2, "offset": 1})).json()
            assert len(page["jobs"]) == 2
            assert page["pagination"]["has_more"] is True
            only = await http.get("/api/jobs", params={"status": "completed,failed"})
            assert [job["id"] for job in only.json()["jobs"]] == [done]
            oldest = await http.get("/api/jobs", params={"sort_order": "asc", "limit": 1})
            assert [job["id"] for job in oldest.json()["jobs"]] == [done]

            detail = (await http.get(f"/api/jobs/{done}")).json()
            assert detail["outputs"] == entry["outputs"]
            assert detail["execution_status"]["status_str"] == "success"
            assert detail["workflow"]["prompt"]["4"]["inputs"]["ckpt_name"] == CHECKPOINTS[0]
            pending = (await http.get(f"/api/jobs/{waiting[-1]}")).json()
            assert (pending["status"], set(pending["workflow"])) == (
                "pending", {"prompt", "extra_data"},
            )  # fmt: skip
            missing = await http.get(f"/api/jobs/{uuid.uuid4()}")
            assert (missing.status_code, missing.json()) == (404, {"error": "Job not found"})

            cancel = await http.post(f"/api/jobs/{waiting[-1]}/cancel")
            assert cancel.json() == {"cancelled": True}
            assert (await http.post(f"/api/jobs/{done}/cancel")).json() == {"cancelled": False}
            batch = await http.post("/api/jobs/cancel", json={"job_ids": [running, waiting[0]]})
            assert batch.json() == {"cancelled": True}
            await client.wait(running)
            assert (await client.job(waiting[-1]))["state"] == "cancelled"
            await client.close()


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"status": "done"}, "Invalid status value(s): done."),
        ({"sort_by": "name"}, "sort_by must be 'created_at' or 'execution_duration'"),
        ({"sort_order": "up"}, "sort_order must be 'asc' or 'desc'"),
        ({"limit": "0"}, "limit must be a positive integer"),
        ({"limit": "x"}, "limit must be an integer"),
        ({"offset": "x"}, "offset must be an integer"),
    ],
)
async def test_jobs_refuses_bad_queries_as_comfyui(
    redis_url: str,
    tmp_path: Path,
    emulators: list[WorkerHandle],
    farm_layout: FarmLayout,
    params: dict[str, str],
    error: str,
) -> None:
    async with gateway(redis_url, tmp_path, emulators, farm_layout.input_dir) as http:
        answer = await http.get("/api/jobs", params=params)
        assert answer.status_code == 400
        assert answer.json()["error"].startswith(error)
        bad_batch = await http.post("/api/jobs/cancel", json={"job_ids": "x"})
        assert (bad_batch.status_code, bad_batch.json()) == (
            400,
            {"error": "job_ids must be a list"},
        )


# -- user data -------------------------------------------------------------------------------


async def test_user_data_is_kept_once_in_the_data_dir_not_by_a_worker(
    redis_url: str, tmp_path: Path, emulators: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    async with gateway(redis_url, tmp_path, emulators, farm_layout.input_dir) as http:
        assert (await http.get("/users")).json() == {"storage": "server", "migrated": False}
        saved = await http.post("/api/userdata/workflows%2Fa.json", content=b'{"nodes": []}')
        assert (saved.status_code, saved.json()) == (200, "workflows/a.json")
        stored = tmp_path / "data" / "user" / "default" / "workflows" / "a.json"
        assert stored.read_bytes() == b'{"nodes": []}'
        assert (await http.get("/users")).json()["migrated"] is True
        read = await http.get("/userdata/workflows%2Fa.json")
        assert (read.status_code, read.content) == (200, b'{"nodes": []}')
        taken = await http.post("/userdata/workflows%2Fa.json?overwrite=false", content=b"{}")
        assert (taken.status_code, taken.text) == (409, "File already exists")

        listed = await http.get("/userdata", params={"dir": "workflows", "full_info": "true"})
        assert [(f["path"], f["size"]) for f in listed.json()] == [("a.json", 13)]
        split = await http.get("/api/userdata", params={"dir": "workflows", "split": "true"})
        assert split.json() == [["a.json", "a.json"]]
        tree = (await http.get("/v2/userdata")).json()
        assert [(e["path"], e["type"]) for e in tree] == [
            ("workflows", "directory"), ("workflows/a.json", "file"),
        ]  # fmt: skip

        moved = await http.post("/userdata/workflows%2Fa.json/move/workflows%2Fb.json")
        assert moved.json() == "workflows/b.json"
        assert (await http.get("/userdata/workflows%2Fa.json")).status_code == 404
        assert (await http.delete("/userdata/workflows%2Fb.json")).status_code == 204
        assert not (stored.parent / "b.json").exists()

        assert (await http.post("/settings/Comfy.Locale", json="fr")).status_code == 200
        assert (await http.post("/api/settings", json={"Comfy.X": 1})).status_code == 200
        assert (await http.get("/settings")).json() == {"Comfy.Locale": "fr", "Comfy.X": 1}
        assert (await http.get("/api/settings/Comfy.Locale")).json() == "fr"
        # No worker saw any of it: its own user routes still answer as a fresh instance.
        async with httpx.AsyncClient(base_url=emulators[0].url) as worker:
            assert (await worker.get("/settings/Comfy.Locale")).json() is None


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/userdata/..%2F..%2Fsecret.txt", 403),
        ("POST", "/userdata/..%2Fescape.json", 403),
        ("GET", "/userdata/%2Fetc%2Fpasswd", 403),
        ("GET", "/userdata/%252e%252e%252fsecret.txt", 403),  # decoded twice, as ComfyUI
        ("DELETE", "/userdata/..%2Fsecret.txt", 403),
        ("POST", "/userdata/ok.json/move/..%2F..%2Fsecret.txt", 404),  # no source file
        ("GET", "/userdata?dir=..", 403),
        ("GET", "/userdata?dir=%2Fetc", 403),
        ("GET", "/v2/userdata?path=..%2F..", 400),
        ("GET", "/v2/userdata?path=missing", 404),
        ("GET", "/userdata/a/b/c", 404),
    ],
)
async def test_user_data_paths_cannot_leave_the_user_folder(
    redis_url: str,
    tmp_path: Path,
    emulators: list[WorkerHandle],
    farm_layout: FarmLayout,
    method: str,
    path: str,
    status: int,
) -> None:
    secret = tmp_path / "data" / "secret.txt"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("secret")
    async with gateway(redis_url, tmp_path, emulators, farm_layout.input_dir) as http:
        answer = await http.request(method, path, content=b"{}")
        assert answer.status_code == status
        assert b"secret" not in answer.content
    assert secret.read_text() == "secret"
    assert not (tmp_path / "data" / "user" / "escape.json").exists()


async def test_moving_a_file_out_of_the_user_folder_is_refused(
    redis_url: str, tmp_path: Path, emulators: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    async with gateway(redis_url, tmp_path, emulators, farm_layout.input_dir) as http:
        await http.post("/userdata/ok.json", content=b"{}")
        answer = await http.post("/userdata/ok.json/move/..%2F..%2Fout.json")
        assert answer.status_code == 403
        assert (await http.get("/userdata/ok.json")).status_code == 200
    assert not (tmp_path / "out.json").exists()


# -- clears scoped to the caller ---------------------------------------------------------------


async def test_clear_removes_only_the_callers_own_queue_and_history(
    redis_url: str, tmp_path: Path, farm_layout: FarmLayout
) -> None:
    with started_emulators(farm_layout, ["clr0"]) as handles:
        async with gateway(redis_url, tmp_path, handles, farm_layout.input_dir) as http:
            mine, theirs = (
                ComfyStyleClient(str(http.base_url)),
                ComfyStyleClient(str(http.base_url)),
            )
            for client in (mine, theirs):
                await client.open()
                await client.wait(await client.queue_prompt(txt2img(CHECKPOINTS[0], "clr")))
            slow = txt2img(CHECKPOINTS[0], "clr_slow", steps=5000, size=1024)
            blocker = await theirs.queue_prompt(slow)
            my_waiting = [await mine.queue_prompt(slow) for _ in range(2)]
            their_waiting = await theirs.queue_prompt(slow)

            refused = await http.post("/queue", json={"clear": True})
            assert refused.status_code == 403  # nobody named: no one's items
            assert "client_id" in refused.json()["error"]["message"]
            cleared = await http.post("/queue", json={"clear": True, "client_id": mine.client_id})
            assert cleared.status_code == 200
            for job_id in my_waiting:
                assert (await mine.job(job_id))["state"] == "cancelled"
            assert (await theirs.job(their_waiting))["state"] in ("pending", "assigned")

            await http.post("/history", json={"clear": True}, params={"clientId": mine.client_id})
            owners = [
                entry["prompt"][3]["client_id"]
                for entry in (await http.get("/history")).json().values()
            ]
            assert owners == [theirs.client_id]
            await http.post("/interrupt", json={"client_id": theirs.client_id})
            await theirs.wait(blocker)
            await http.post("/queue", json={"delete": [their_waiting]})
            await mine.close()
            await theirs.close()


async def test_a_browser_clears_what_its_own_websockets_queued(
    redis_url: str, tmp_path: Path, emulators: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    root = web_root(tmp_path)
    async with gateway(
        redis_url, tmp_path, emulators, farm_layout.input_dir, front_end_root=root
    ) as http:
        browser_id = (await http.get("/")).cookies[COOKIE]
        tab = ComfyStyleClient(str(http.base_url))
        tab.http.cookies.set(COOKIE, browser_id)
        other = ComfyStyleClient(str(http.base_url))
        url = str(http.base_url).replace("http", "ws", 1)
        # The web UI's socket carries the browser's cookie; its HTTP calls name no client.
        async with connect(
            f"{url}/ws?clientId={tab.client_id}",
            additional_headers={"Cookie": f"{COOKIE}={browser_id}"},
        ) as socket:
            await socket.recv()
            await tab.open()
            await other.open()
            for client in (tab, other):
                await client.wait(await client.queue_prompt(txt2img(CHECKPOINTS[0], "brw")))
            answer = await tab.http.post("/api/history", json={"clear": True})
            assert answer.status_code == 200
            owners = [
                e["prompt"][3]["client_id"] for e in (await http.get("/history")).json().values()
            ]
            assert owners == [other.client_id]
        await tab.close()
        await other.close()


# -- file lists that follow the workers --------------------------------------------------------


async def test_an_upload_is_listed_by_object_info_at_once(
    redis_url: str, tmp_path: Path, emulators: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    name = f"up_{uuid.uuid4().hex[:8]}.png"
    async with gateway(
        redis_url, tmp_path, emulators, farm_layout.input_dir, catalog_refresh_s=3600
    ) as http:
        assert (await upload(http, name)).status_code == 200
        info = (await http.get("/object_info/LoadImage")).json()
        assert name in info["LoadImage"]["input"]["required"]["image"][0]


async def test_a_prompt_naming_a_file_added_behind_the_gateway_is_asked_of_the_workers(
    redis_url: str, tmp_path: Path, farm_layout: FarmLayout
) -> None:
    name = f"behind_{uuid.uuid4().hex[:8]}.png"
    with started_emulators(farm_layout, ["cat0"]) as handles:
        # Workers by URL, no shared input folder known: only their lists tell what exists.
        async with gateway(redis_url, tmp_path, handles, None, catalog_refresh_s=3600) as http:
            async with httpx.AsyncClient(base_url=handles[0].url) as worker:
                assert (await upload(worker, name)).status_code == 200
            accepted = await http.post("/prompt", json={"prompt": load_image(name, "cat")})
            assert accepted.status_code == 200, accepted.text
            refused = await http.post("/prompt", json={"prompt": load_image("none.png", "cat")})
            assert refused.status_code == 400
            errors = refused.json()["node_errors"]["1"]["errors"]
            assert errors[0]["type"] == "value_not_in_list"
            assert (await http.get("/api/jobs/" + accepted.json()["prompt_id"])).status_code == 200


async def test_object_info_is_read_again_on_a_schedule(
    redis_url: str, tmp_path: Path, farm_layout: FarmLayout
) -> None:
    name = f"sched_{uuid.uuid4().hex[:8]}.png"
    with started_emulators(farm_layout, ["sch0"]) as handles:
        async with gateway(redis_url, tmp_path, handles, None, catalog_refresh_s=0.2) as http:
            (farm_layout.input_dir / name).write_bytes(images.png((1, 2, 3)))

            async def listed() -> bool:
                info = (await http.get("/object_info/LoadImage")).json()
                return name in info["LoadImage"]["input"]["required"]["image"][0]

            await until(listed, f"{name} never listed by the scheduled refresh")
